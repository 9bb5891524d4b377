"""The runtime (installed as `poptorch.runtime`): two parts that never import each other.

- `jit/`: a final ipu-dialect module turned into readable Python source that calls one
  NumPy kernel per op, replicas as a leading array axis (`jit/kernels/`, `jit/codegen/`).
- `machine/`: the machine model, charging cycles, memory and transfers on a simulated
  multi-IPU system.
"""
