"""NumPy kernels, one module per op family, in one table keyed by op class.

- `registry.py`: `KERNELS` (op class -> `Kernel`), filled by `@kernel(ReluOp, ...)`
  next to each kernel; `KERNEL_EXEMPT` (op class -> why it has no kernel); `HELPERS`
  (functions the program calls that implement no op); `kernel_of(op)`, the JIT's look-up.
- `common.py`: what the families share (static arguments, leading replica axes, buffer
  reuse).
- One module per family, as in the dialect: `elementwise`, `linear`, `reduction`,
  `convolution`, `convolution_backward`, `data_movement`, `indexing`, `creation`,
  `optimizer`, `structure`, `slicing`, `matmul_serialization`, `ctc`, `precision`,
  `user_code` (custom ops, host callbacks).

Importing this package registers every family's kernels.
"""

from poptorch.runtime.jit.kernels import (  # noqa: F401 - each registers its kernels
    convolution,
    convolution_backward,
    creation,
    ctc,
    data_movement,
    elementwise,
    indexing,
    linear,
    matmul_serialization,
    optimizer,
    precision,
    reduction,
    slicing,
    structure,
    user_code,
)
from poptorch.runtime.jit.kernels.registry import (
    HELPERS,
    KERNEL_EXEMPT,
    KERNELS,
    Kernel,
    kernel,
    kernel_of,
)

__all__ = ["HELPERS", "KERNELS", "KERNEL_EXEMPT", "Kernel", "kernel", "kernel_of"]
