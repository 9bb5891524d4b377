"""PopTorch's on-device control flow: `for_loop` (spec 11, API reference) and `cond`
(PopTorch 3.x's `poptorch.cond`, beyond the spec).

While poptorch captures a model, each becomes one of torch's higher-order ops, which
trace the body once into its own subgraph and lift the tensors it uses from the
enclosing code (weights, other activations) into explicit operands: `for_loop` a
`torch.ops.higher_order.while_loop` whose condition is `counter < count`, `cond` a
`torch.ops.higher_order.cond`. The importer (`poptorch._frontend.control_flow`) turns
them into `scf.for` / `scf.if` regions calling the body's function, so the body appears
once in the IR whatever `count` is. On the CPU (the model run as plain PyTorch) the body
runs `count` times, and `cond` runs the branch `condition` selects, as PopTorch's own
CPU path does.

Both are inference-only in PopTorch (popart_compiler/source/Compiler.cpp: "poptorch.
for_loop() is only supported in inference.", likewise for cond); a training model
using them gets that error here. Inputs are passed by value (PopTorch clones them), so
an in-place update inside the body does not change the caller's tensor.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch._higher_order_ops.while_loop import while_loop
from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing

from poptorch._frontend.capture import isRunningOnIpu
from poptorch._frontend.model_code import running_user_line
from poptorch.errors import Error

Body = Callable[..., "torch.Tensor | list[torch.Tensor] | tuple[torch.Tensor, ...]"]


def _check_list(inputs, what: str, name: str) -> None:
    """PopTorch's checks of an input list (python/ops.py), with its messages (a
    poptorch.Error at the caller's line here, where PopTorch raises a ValueError)."""
    if not isinstance(inputs, list):
        raise Error(f"poptorch.{name} expects {what} to be a list of tensors. "
                    "(Object is not list)", type="capture", location=running_user_line())
    for index, tensor in enumerate(inputs):
        if not isinstance(tensor, torch.Tensor):
            raise Error(f"poptorch.{name} expects {what} to be a list of tensors. (Object "
                        f"contained in list at index {index} is not torch.tensor)",
                        type="capture", location=running_user_line())


def _outputs(result, name: str) -> list[torch.Tensor]:
    outputs = _listed(result)
    for index, tensor in enumerate(outputs):
        if not isinstance(tensor, torch.Tensor):
            raise Error(f"the body of poptorch.{name} returned a {type(tensor).__name__} "
                        f"as its output {index}; return only tensors", type="capture",
                        location=running_user_line())
    return outputs


def _inference_only(name: str) -> None:
    # inference models are captured under torch.no_grad(), training graphs with autograd
    if isRunningOnIpu() and torch.is_grad_enabled():
        raise Error(f"poptorch.{name}() is only supported in inference.", type="capture",
                    location=running_user_line())


def for_loop(count: int, body: Body, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    """Run `body` `count` times on the device, each iteration's outputs the next one's
    inputs; returns the last outputs. `body` takes and returns as many tensors as
    `inputs` has, of the same shapes and dtypes."""
    _check_list(inputs, "input tensors (inputs)", "for_loop")
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise Error(f"poptorch.for_loop's count must be a non-negative Python int, not "
                    f"{count!r}: the trip count is fixed when the model compiles",
                    type="capture", location=running_user_line())
    _inference_only("for_loop")
    values = [t.clone() for t in inputs]
    if not isRunningOnIpu():
        for _ in range(count):
            values = _checked(body, values)
        return values

    with disable_proxy_modes_tracing():  # shapes and dtypes only: records no graph node
        _checked(body, [t.clone() for t in values])

    def condition(counter, *_):
        return counter < count

    def step(counter, *carried):
        # (traced by torch's dynamo: no checks here, they ran above)
        # inputs by value: torch's while_loop refuses a body that updates them in place
        outputs = _listed(body(*[t.clone() for t in carried]))
        return (counter + 1, *[t.clone() for t in outputs])

    start = torch.zeros((), dtype=torch.int32)
    return list(while_loop(condition, step, (start, *values))[1:])


def _checked(body: Body, values: list[torch.Tensor]) -> list[torch.Tensor]:
    """The body's outputs, which must match its inputs in number, shape and dtype: they
    are the next iteration's inputs."""
    outputs = _outputs(body(*values), "for_loop")
    if len(outputs) != len(values):
        raise Error(f"the body of poptorch.for_loop returned {len(outputs)} tensors for "
                    f"its {len(values)} inputs; it must return one tensor per input, of "
                    "the same shape and dtype", type="capture", location=running_user_line())
    for index, (out, value) in enumerate(zip(outputs, values, strict=True)):
        if out.shape != value.shape or out.dtype != value.dtype:
            raise Error(f"the body of poptorch.for_loop returned output {index} of shape "
                        f"{list(out.shape)} and dtype {out.dtype} for an input of shape "
                        f"{list(value.shape)} and dtype {value.dtype}; each output must "
                        "keep its input's shape and dtype", type="capture",
                        location=running_user_line())
    return outputs


def cond(condition: torch.Tensor, then_body: Body, then_inps: list[torch.Tensor],
         else_body: Body, else_inps: list[torch.Tensor]) -> list[torch.Tensor]:
    """Run `then_body(*then_inps)` if the one-element boolean tensor `condition` is true
    at run time, else `else_body(*else_inps)`; both must return the same number of
    tensors, of matching shapes and dtypes. Inference only."""
    if not isinstance(then_inps, list) or not isinstance(else_inps, list):
        raise Error("poptorch.cond expects then_inps and else_inps tensors to be a list of "
                    "tensors. (Object is not list)", type="capture",
                    location=running_user_line())
    _check_list(then_inps, "then_inps", "cond")
    _check_list(else_inps, "else_inps", "cond")
    if not isinstance(condition, torch.Tensor) or condition.numel() != 1 \
            or condition.dtype != torch.bool:
        what = f"a tensor of shape {list(condition.shape)} and dtype {condition.dtype}" \
            if isinstance(condition, torch.Tensor) else f"a {type(condition).__name__}"
        raise Error(f"poptorch.cond's condition must be a one-element torch.bool tensor, "
                    f"not {what}", type="capture", location=running_user_line())
    _inference_only("cond")
    if not isRunningOnIpu():
        if bool(condition):
            return _outputs(then_body(*then_inps), "cond")
        return _outputs(else_body(*else_inps), "cond")
    with disable_proxy_modes_tracing():  # the branches' outputs must match: checked here
        _matching(_outputs(then_body(*then_inps), "cond"),
                  _outputs(else_body(*else_inps), "cond"))
    count = len(then_inps)

    def then_branch(*values):
        values = [t.clone() for t in values[:count]]  # by value, as for_loop's
        return tuple(t.clone() for t in _listed(then_body(*values)))

    def else_branch(*values):
        values = [t.clone() for t in values[count:]]
        return tuple(t.clone() for t in _listed(else_body(*values)))

    return list(torch.cond(condition.reshape(()), then_branch, else_branch,
                           (*then_inps, *else_inps)))


def _listed(result) -> list:
    return list(result) if isinstance(result, list | tuple) else [result]


def _matching(then_out: list[torch.Tensor], else_out: list[torch.Tensor]) -> None:
    """Both branches of a cond make the same results: one list of tensors receives them."""
    if len(then_out) != len(else_out):
        raise Error(f"the branches of poptorch.cond return {len(then_out)} and "
                    f"{len(else_out)} tensors; both must return the same number",
                    type="capture", location=running_user_line())
    for index, (a, b) in enumerate(zip(then_out, else_out, strict=True)):
        if a.shape != b.shape or a.dtype != b.dtype:
            raise Error(f"output {index} of poptorch.cond's then_body has shape "
                        f"{list(a.shape)} and dtype {a.dtype} but the else_body's has shape "
                        f"{list(b.shape)} and dtype {b.dtype}; each output must match",
                        type="capture", location=running_user_line())
