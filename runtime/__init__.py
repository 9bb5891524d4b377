"""The NumPy model of a multi-IPU machine: JIT codegen, kernels, cost model, host runtime.

Empty until the inference issue lands; the package exists so that the layout and the
`poptorch.runtime` import path are fixed from the start.
"""
