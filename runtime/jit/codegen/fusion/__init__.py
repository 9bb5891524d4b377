"""Fused kernels: groups of elementwise ipu ops (and a reduction ending them), and
pooling and convolution windows, each compiled by MLIR into one loop nest over memory.

The JIT finds the groups of a function (`grouping.find_groups`; the window ops'
one-op groups: `window.window_group`); each group becomes one function of a kernel
module in MLIR's arith, math, scf and llvm dialects, written by the emitter of its kind
(`emitters.EMITTERS`: `elementwise`, `window`); MLIR's conversion passes lower the
module to the LLVM dialect and MLIR's ExecutionEngine compiles it
(`compiled.compile_kernels`); LLVM vectorises the loops. The program calls each group
through a `compiled.FusedKernel`. Compiled modules and the groups they came from are
kept in the executable cache directory (`cache`).

- `group.py`: `Group`, `Read`, `Kind` and the element types and sizes the others share.
- `grouping.py`: which ops fuse into one kernel, and what each group reads.
- `elementwise.py`: the elementwise emitter (loops, reads, `scalar_ir` bodies, stores).
- `window.py`: the window emitter's table by op class (`WINDOWS`), over `pooling.py`
  (max pooling and its gradient), `convolution.py` (im2col, col2im and the BLAS
  products around them) and `depthwise.py` (direct kernels of grouped convolutions
  with few channels a group), which write their bodies with `lines.py`.
- `emitters.py`: `EMITTERS` (kind -> emitter) and the kernel module.
- `compiled.py`: lowering, compiling, loading and calling compiled kernels.
- `threads.py`: the worker threads that run big calls' chunks (ranges of each kernel's
  outer parallel loop) beside the caller, on torch's thread count.
- `cache.py`: the on-disk shared objects and index entries, and their keys.

The IR passes and the cost model never see these groups: the machine model's timeline
still costs each ipu op as the IPU runs it; fusion is how the host runs the numbers.
"""

from poptorch.runtime.jit.codegen.fusion.cache import kernel_directory

__all__ = ["kernel_directory"]
