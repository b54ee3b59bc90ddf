"""Training methods, one module each, and the registry (``registry``) that names them."""
