"""Shared test support, imported as ``tests.support.<module>`` (``tests`` is a package).

- ``toy_bundle``: the hand-made two-policy toy bundle and its linear ONNX builder.
- ``dataset_bundle``: the one small bundle for a built-in dataset (no trainer needed).
- ``reference_walk``: the one independent walk over an exported bundle (``InferenceSession``).
- ``edge_doubles``: in-process and MQTT stand-ins for the cloud that answer with the HPC.
- ``message_examples``, ``estimator_checks``, ``dag_parity``: shared cases and assertions.

Submodules are imported one by one so a test only pays for (and needs) what it uses.
"""
