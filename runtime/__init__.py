"""The NumPy model of a multi-IPU machine (installed as `poptorch.runtime`).

`jit` turns a final ipu-dialect module into readable Python source that calls one
NumPy kernel per op (`kernels`, one registry filled per op family); replicas run as a
leading array axis. The cost and memory model join here with the machine-model issue.
"""
