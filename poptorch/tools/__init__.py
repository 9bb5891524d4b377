"""Command-line tools: the `ipu-opt` pass driver and its diagnostics verifier."""
