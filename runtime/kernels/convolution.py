"""NumPy kernels of the convolution family (being written)."""
