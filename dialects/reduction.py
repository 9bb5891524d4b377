"""ipu ops of the reduction family (being written)."""
