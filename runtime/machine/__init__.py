"""The machine model: what a compiled module costs on a simulated IPU system.

- `system.py`: the IPU (GC200 by default) and the IPU-POD64 it sits in, with the public
  sources of every constant.
- `cost.py`: cycles and temporary memory of each ipu op.
- `memory.py`: the memory estimate per IPU and tensor class.
- `timeline.py`: the simulated timeline of a call (compute, exchange, host I/O).
- `profile.py`: the profile report; `faults.py`: injected device faults.

It never imports the JIT (`poptorch.runtime.jit`).
"""
