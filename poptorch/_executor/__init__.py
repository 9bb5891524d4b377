"""The wrapped model: `PoplarExecutor` (`executor.py`) and the collaborators it holds.

- `executor.py`: the executor, its state and a call's flow (compile, weights, steps).
- `training.py`: `TrainingExecutor`, the training model with its optimizer programs.
- `trainers.py`: which training executor owns a user model's weights (lazy host sync).
- `device.py`: `DeviceLease`, the device of the simulated IPU-POD64 a model holds
  (attach, detach, faults), and the process-wide lease registry.
- `figures.py`: `MachineFigures`, the machine model's figures of a compiled model
  (memory, timeline, latencies, profile report).
- `persistence.py`: executable files as functions (`compileAndExport`, `save`,
  `loadExecutable`, and the reading behind `poptorch.load`, which is in `_api.py`).
- `batches.py`: a call's inputs split into micro-batches, its outputs combined.
- `model_copy.py`: the executor's shallow and narrowed copies of the user's model.
- `replica_grouping.py`: per-replica variables (`replicaGrouping`, spec 4.4.3).
- `model_pickle.py`: the restricted pickle of a model inside an executable.
- `hardware.py`: spec 11.2's questions about the (simulated) IPU hardware.
"""
