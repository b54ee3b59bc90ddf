"""The simulator: what a bundle costs and how it answers, before anything is deployed.

- ``simulator.replay.replay`` — a dataset split through the bundle with a simulated clock, the
  network model and the cloud's ``HpcInference`` in-process (fast, deterministic): by default
  one batched walk over the ONNX (``protocol.walk``, ``simulator.batch_replay``) making the
  decisions the runtime makes (per-item sizes and bandwidth limits included); ``batched=False``
  (and rows holding failed reads) drive the real ``EdgeRuntime`` row by row. A
  ``replay_session.ReplaySession`` verifies a bundle once for many replays and caches the
  HPC's answers per (HPC file, rows, feature mask) in memory and on disk (``hpc_cache``).
- ``simulator.hil.run_hil`` — hardware in the loop: a real broker, ``adaptedge cloud serve``
  and N ``adaptedge edge run`` processes, optionally behind an impaired link.
- ``simulator.report`` — report.md, report.json and PNG plots (frontier with baselines, cost
  breakdown in real units, latency CDF, escalation/degraded rates over time with outages).
- ``simulator.remote_sensors`` — sensor reads served over MQTT from recorded rows, for a
  device under test that is not ours to start.
- Models: ``clock`` (simulated time), ``network`` (round trip, loss, bandwidth, outages),
  ``energy`` (on ``protocol.costs``), ``scenario`` (TOML), ``proxy`` (loopback impairment).
"""
