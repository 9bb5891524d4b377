"""Code generation for fused kernels: groups of elementwise and window ops written as
MLIR, compiled by MLIR's ExecutionEngine and called from the JIT's program."""
