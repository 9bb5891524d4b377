"""NumPy kernels of the indexing family (being written)."""
