"""A bundle's operating point as a dependency-free C99 library (``adaptedge export c``).

- ``library``: ``export_c`` (verify, translate, write ``adaptedge_policy.h``/``.c``);
- ``ops``: a node model's ONNX graph as one C function; ``tree_code``: tree ensembles as
  if/else, deciding as onnxruntime does in float32;
- ``tables``: sensors, costs, nodes and actions as C tables; ``walk_code``: the walk in C;
- ``header``: the public header; ``literals``: exact float/double/string constants.
"""

from adaptedge.trainer.export.c.library import CLibrary, export_c

__all__ = ["CLibrary", "export_c"]
