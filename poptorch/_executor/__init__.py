"""The wrapped model: `PoplarExecutor` (`executor.py`) and what it is composed of.

- `executor.py`: the executor, its state and a call's flow (inputs, steps, outputs).
- `training.py`: `TrainingExecutor`, the training model with its optimizer programs.
- `device.py`: holding a device of the simulated IPU-POD64 (attach, detach, faults).
- `hardware.py`: spec 11.2's questions about the (simulated) IPU hardware.
- `figures.py`: the machine model's figures of a compiled model (memory, timeline).
- `persistence.py`: executables on disk (`compileAndExport`, `save`, `loadExecutable`).
- `model_pickle.py`: the restricted pickle of a model inside an executable.
- `replica_grouping.py`: per-replica variables (`replicaGrouping`, spec 4.4.3).
"""
