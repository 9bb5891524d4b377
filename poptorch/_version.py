"""The poptorch-mlir version, on its own so that any layer can read it without importing
the root package (`pyproject.toml` names the same version)."""

__version__ = "0.1.0"
