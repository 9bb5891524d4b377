"""NumPy kernels of the ops that run user code: `ipu.custom` calls the implementation
registered for its (name, domain, version), `ipu.host_call` the callback registered
under its ID (`poptorch.runtime.user_code`), both looked up when the program runs.

The user's code sees the op's declared shapes: an operand with leading (replica) axes
is taken apart, the code called once per replica in order, and its results stacked.
Results are checked against the op's declared result types: a custom op must return
exactly those shapes and dtypes (PopTorch's `example_outputs`); a host callback's
results are converted to the declared dtypes, as PopTorch copies them into its output
buffers (`copy_`), and must have the declared shapes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from torch_mlir import ir

from poptorch.dialects.custom import CustomOp, HostCallOp
from poptorch.dialects.types import numpy_dtype
from poptorch.errors import Error
from poptorch.runtime.jit.kernels.registry import kernel
from poptorch.runtime.user_code import (
    attribute_values,
    custom_op_impl,
    describe,
    host_callback,
)


def _results(op: ir.OpView) -> tuple[tuple[tuple[int, ...], np.dtype], ...]:
    return tuple((tuple(r.type.shape), np.dtype(numpy_dtype(r.type.element_type)))
                 for r in op.operation.results)


def _ranks(op: ir.OpView) -> tuple[int, ...]:
    return tuple(v.type.rank for v in op.operation.operands)


def custom_static(op: ir.OpView) -> dict[str, Any]:
    attrs = op.operation.attributes
    return {"op_name": ir.StringAttr(attrs["op_name"]).value,
            "domain": ir.StringAttr(attrs["domain"]).value,
            "version": ir.IntegerAttr(attrs["domain_version"]).value,
            "attrs": attribute_values(attrs["attrs"]),
            "gradient": bool(ir.IntegerAttr(attrs["gradient"]).value),
            "ranks": _ranks(op), "results": _results(op)}


def host_call_static(op: ir.OpView) -> dict[str, Any]:
    return {"callback": ir.StringAttr(op.operation.attributes["callback"]).value,
            "ranks": _ranks(op), "results": _results(op)}


def per_replica(arrays: Sequence[np.ndarray], ranks: Sequence[int],
                call: Callable[[list[np.ndarray]], list[np.ndarray]],
                results: Sequence[tuple[tuple[int, ...], np.dtype]]
                ) -> np.ndarray | tuple[np.ndarray, ...]:
    """`call` on the operands' declared shapes, once per index of their leading axes,
    its results stacked along those axes (one array for one result, as every kernel)."""
    lead = np.broadcast_shapes(*(a.shape[: a.ndim - r] for a, r in zip(arrays, ranks,
                                                                        strict=True)))
    if not lead:
        outs = call([np.asarray(a) for a in arrays])
    else:
        outs = [np.empty(lead + shape, dtype) for shape, dtype in results]
        for index in np.ndindex(*lead):
            parts = [np.broadcast_to(a, lead + a.shape[a.ndim - r:])[index]
                     if a.ndim > r else a for a, r in zip(arrays, ranks, strict=True)]
            for out, value in zip(outs, call(parts), strict=True):
                out[index] = value
    return outs[0] if len(outs) == 1 else tuple(outs)


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


def _checked(values: list[Any], results, what: str, cast: bool) -> list[np.ndarray]:
    """`values` as arrays of the declared result (shape, dtype)s; an Error naming `what`
    and the output that differs."""
    if len(values) != len(results):
        raise Error(f"{what} returned {len(values)} outputs, expected {len(results)}",
                    type="runtime")
    checked = []
    for index, (value, (shape, dtype)) in enumerate(zip(values, results, strict=True)):
        dtype = np.dtype(dtype)  # (the program passes np.float32, a scalar type)
        if hasattr(value, "detach"):  # a torch tensor (from a host callback)
            value = value.detach().cpu().numpy()
        array = np.asarray(value)
        if array.shape != shape or (array.dtype != dtype and not cast):
            raise Error(f"{what} returned output {index} of shape {list(array.shape)} and "
                        f"dtype {array.dtype}; expected shape {list(shape)} and dtype "
                        f"{dtype}", type="runtime")
        checked.append(array.astype(dtype, copy=False))
    return checked


@kernel(CustomOp, static=custom_static)
def custom(*arrays, op_name, domain, version, attrs, gradient, ranks, results):
    """The registered forward (or, for `gradient`, backward) of the op."""
    impl = custom_op_impl(op_name, domain, version)
    what = describe(op_name, domain, version)
    if gradient:
        n_in = len(results)
        n_out = (len(arrays) - n_in) // 2
        if impl.backward is None:
            raise Error(f"{what} has no gradient: register one with "
                        "poptorch.register_custom_op(..., backward=...)", type="runtime")

        def call(parts):
            inputs, outs, grads = parts[:n_in], parts[n_in:n_in + n_out], parts[n_in + n_out:]
            values = _as_list(impl.backward(grads, inputs, outs, **attrs))
            values = [np.zeros(shape, dtype) if v is None else v
                      for v, (shape, dtype) in zip(values, results, strict=False)] + \
                values[len(results):]
            return _checked(values, results, f"the gradient of {what}", cast=False)
    else:
        def call(parts):
            return _checked(_as_list(impl.forward(*parts, **attrs)), results, what,
                            cast=False)
    return per_replica(arrays, ranks, call, results)


@kernel(HostCallOp, static=host_call_static)
def host_call(*arrays, callback, ranks, results):
    """The callback on torch tensors (CPU), its results back as arrays."""
    import torch  # start-up cost: only programs with host callbacks need torch here

    fn = host_callback(callback)

    def call(parts):
        with torch.no_grad():
            values = fn(*(torch.from_numpy(np.array(p)) for p in parts))
        return _checked(_as_list(values), results, f"the host callback '{callback}'",
                        cast=True)

    return per_replica(arrays, ranks, call, results)
