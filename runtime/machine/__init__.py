"""The machine model: what a compiled module costs on a simulated IPU system.

- `system.py`: the IPU (GC200 by default) and the IPU-POD64 it sits in, with the public
  sources of every constant.
- Cost: `cost.py`, the cycles and temporary memory of each ipu op (`op_cost`) from
  `COST_RULES` keyed by op class, and `COST_EXEMPT`; `cost_families.py`, each op
  family's rule and its formulas; `plan.py`, `OpCost`, the `Plan` of an op over the
  tiles and PopLibs' vector rates.
- Memory: `memory.py`, the memory estimate per IPU and tensor class (`estimate`);
  `memory_estimate.py`, its inputs and results (`MemoryEstimate`, the out-of-memory
  error); `op_memory.py`, `MEMORY_RULES` keyed by op class, `MEMORY_EXEMPT` and the code
  bytes; `liveness.py`, the liveness walk of one function.
- Timeline: `timeline.py`, the simulated timeline of a call (`simulate`); `events.py`,
  its results (`Timeline`, `Event`, `HostStreams`); `tasks.py`, @main read as a task
  graph; `scheduler.py`, list scheduling and the stash.
- `profile.py`: the profile report; `faults.py`: injected device faults.

Every op table is keyed by op class (`poptorch.dialects.op_class`); test/api/
test_op_tables.py requires each ipu op to have a rule or a named exemption in each.
It never imports the JIT (`poptorch.runtime.jit`) nor the passes (`poptorch.passes`).
"""
