"""Code generation for fused kernels: groups of elementwise ops and window ops written as
MLIR, compiled by MLIR's ExecutionEngine and called from the JIT's program.

- `scalar_ir.py`: the scalar body of each fusible elementwise op (`EMITTERS`, keyed by
  op class), and float32 exp, tanh and erf as arith ops.
- `fusion/`: grouping, one emitter per kind of kernel, the compiled-kernel calls and the
  on-disk kernel cache (see its docstring).
"""
