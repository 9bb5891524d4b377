"""The JIT: an ipu-dialect module turned into Python that calls NumPy kernels.

- `program.py`: `compile_module` and the compiled `Program` (its readable source).
- `kernels/`: one NumPy kernel per ipu op, one module per op family, in one table keyed
  by op class (`kernels/registry.py`: `KERNELS`, and `KERNEL_EXEMPT` for the ops that
  have none on purpose).
- `codegen/`: fused kernels written as MLIR and compiled through MLIR's ExecutionEngine:
  `scalar_ir.py` (the scalar body of each fusible op, by op class) and `fusion/`
  (grouping, one emitter per kind of kernel, the compiled-kernel calls and the on-disk
  kernel cache, whose key hashes every file of this package).
- `hoist.py`: the ops reading only weights, moved to a function run when they change.
- `random.py`: the device's random generator; `heap.py`: the allocator setting.

It never imports the machine model (`poptorch.runtime.machine`) nor the passes.
"""
