"""The trainer's ONNX toolkit: every model a bundle holds is built here.

- ``graph``: ``GraphBuilder`` and ``assemble``/``finish`` (the only ``make_graph``/``make_model``
  calls; versions from ``protocol.onnx_contract``);
- ``trees``: the one tree-ensemble emitter and float32 threshold rounding;
- ``linear``: the one linear builder;
- ``heads``: probabilities (sigmoid/softmax), gate, confidence, linear and ranked policies;
- ``models``: whole models (a policy node's, linear, tree ensemble, MLP);
- ``sklearn``: scikit-learn conversion; ``fuse``: a classifier plus an action scorer in one graph;
- ``run``: onnxruntime on float32 rows; ``bundle``: policies plus the HPC into a bundle on disk;
- ``c``: one operating point as a dependency-free C99 library (``adaptedge export c``).

Submodules are imported explicitly (``from adaptedge.trainer.export.trees import ...``).
"""
