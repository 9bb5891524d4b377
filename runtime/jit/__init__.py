"""The JIT: an ipu-dialect module turned into Python that calls NumPy kernels.

- `program.py`: `compile_module` and the compiled `Program`.
- `kernels/`: one NumPy kernel per ipu op, in one table keyed by op class.
- `codegen/`: fused elementwise and window kernels compiled through MLIR's
  ExecutionEngine, and their on-disk cache.
- `random.py`: the device's random generator; `heap.py`: the allocator setting.

It never imports the machine model (`poptorch.runtime.machine`).
"""
