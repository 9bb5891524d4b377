"""NumPy kernels of the reduction family (being written)."""
