"""adaptedge's trainer: datasets and sensor costs, the HPC, training methods, ONNX export,
the validation frontier and bundle export (``trainer.api.train_bundle`` ties them together).

Modules import their heavy dependencies (scikit-learn, skl2onnx) lazily; ``trainer.data.datasets``
and ``trainer.policy.oracle`` need only numpy (+ onnxruntime) so devices can replay data.
"""
