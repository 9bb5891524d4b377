"""ipu ops of the convolution family (being written)."""
