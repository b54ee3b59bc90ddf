"""The trainer's one policy graph (``graph``), its float64 walk (``walk``) and the one-node
graphs of the gate methods (``one_node``)."""
