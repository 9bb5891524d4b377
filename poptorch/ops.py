"""PopTorch ops (spec 4.6) as torch.library custom ops.

torch.export keeps a custom op whole, and torch-mlir imports it as
`torch.operator "torch.poptorch.<name>"`, which `ipu-convert-poptorch-ops` lowers to
its ipu op. On the CPU the ops run their Python implementation here.
"""

import traceback

import torch

from poptorch.errors import Error


@torch.library.custom_op("poptorch::nop", mutates_args=())
def _nop(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.clone()


@_nop.register_fake
def _(tensor):
    return torch.empty_like(tensor)


# the gradient of a nop is a nop of the gradient (PopART's NopOp), kept in the backward too
_nop.register_autograd(lambda ctx, grad: _nop(grad))


@torch.library.custom_op("poptorch::recomputation_checkpoint", mutates_args=())
def _recomputation_checkpoint(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.clone()


@_recomputation_checkpoint.register_fake
def _(tensor):
    return torch.empty_like(tensor)


_recomputation_checkpoint.register_autograd(lambda ctx, grad: grad)


@torch.library.custom_op("poptorch::ipu_print_tensor", mutates_args=())
def _ipu_print_tensor(tensor: torch.Tensor, title: str,
                      print_gradient: bool = True) -> torch.Tensor:
    return tensor.clone()


@_ipu_print_tensor.register_fake
def _(tensor, title, print_gradient=True):
    return torch.empty_like(tensor)


def _print_gradient(ctx, grad):
    """In the backward pass print the gradient, titled `<title>_gradient` (PopART's
    PrintTensorOp::getGradOps), unless print_gradient=False."""
    if not ctx.print_gradient:
        return grad, None, None
    title = f"{ctx.title}_gradient" if ctx.title else "gradient"
    return _ipu_print_tensor(grad, title, False), None, None


def _print_context(ctx, inputs, output):
    _, ctx.title, ctx.print_gradient = inputs


_ipu_print_tensor.register_autograd(_print_gradient, setup_context=_print_context)


@torch.library.custom_op("poptorch::set_available_memory", mutates_args=())
def _set_available_memory(tensor: torch.Tensor, proportion: float) -> torch.Tensor:
    return tensor.clone()


@_set_available_memory.register_fake
def _(tensor, proportion):
    return torch.empty_like(tensor)


_set_available_memory.register_autograd(lambda ctx, grad: (grad, None))


def nop(tensor: torch.Tensor) -> torch.Tensor:
    """A no-operation: an identity that is never optimised away (spec 4.6.5)."""
    return _nop(tensor)


def recomputationCheckpoint(*tensors: torch.Tensor):  # noqa: N802 - PopTorch's name
    """Keep these values between the forward and backward passes when recomputation is
    enabled (PipelinedExecution.useRecomputation) instead of recomputing them. Returns
    the tensors (one tensor for one argument)."""
    if len(tensors) == 1 and isinstance(tensors[0], list | tuple):
        tensors = tuple(tensors[0])
    out = tuple(_recomputation_checkpoint(t) for t in tensors)
    return out[0] if len(out) == 1 else out


def ipu_print_tensor(tensor: torch.Tensor, title: str = "",
                     print_gradient: bool = True) -> torch.Tensor:
    """Print `tensor` (after `title`) when the model runs on the IPU; returns it unchanged.
    In training, the backward pass prints its gradient (titled `<title>_gradient`) unless
    `print_gradient` is False.

    Use the returned tensor in the rest of the model (spec 4.6.2).
    """
    if not isinstance(print_gradient, bool):
        raise Error(f"ipu_print_tensor: print_gradient must be True or False, got "
                    f"{print_gradient!r}", type="api")
    return _ipu_print_tensor(tensor, title, print_gradient)


def set_available_memory(tensor: torch.Tensor,
                         available_memory_proportion: float) -> torch.Tensor:
    """Set the proportion of tile memory the op producing `tensor` (a convolution, matrix
    multiplication, embedding lookup or indexing operation) may use for temporary data
    (spec 4.6.9); on the output of any other op it is an identity. Returns `tensor`.

    Less temporary memory makes the machine model's plan of the op serialise its
    exchange into more steps (more cycles, see `poptorch.runtime.machine.cost`).
    """
    value = available_memory_proportion
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise Error("set_available_memory: available_memory_proportion must be a proportion "
                    "between 0.0 and 1.0 (inclusive) of tile memory to be made available for "
                    f"temporary memory (default 0.6), got {value!r}", type="api")
    return _set_available_memory(tensor, float(value))


_REDUCTIONS = ("sum", "mean", "none")
# (tensor returned by identity_loss, caller's file:line) during one training capture
_loss_marks: list[tuple[torch.Tensor, str]] = []


@torch.library.custom_op("poptorch::identity_loss", mutates_args=())
def _identity_loss(tensor: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "sum":
        return tensor.sum()
    if reduction == "mean":
        return tensor.mean()
    return tensor.clone()


@_identity_loss.register_fake
def _(tensor, reduction):
    return tensor.new_empty(()) if reduction != "none" else torch.empty_like(tensor)


def _identity_loss_backward(ctx, grad):
    if ctx.reduction == "none":
        return grad, None
    scale = 1.0 / ctx.numel if ctx.reduction == "mean" else 1.0
    return (grad * scale).expand(ctx.shape), None


def _identity_loss_context(ctx, inputs, output):
    tensor, reduction = inputs
    ctx.reduction, ctx.shape, ctx.numel = reduction, tensor.shape, tensor.numel()


_identity_loss.register_autograd(_identity_loss_backward, setup_context=_identity_loss_context)


def identity_loss(x: torch.Tensor, reduction: str) -> torch.Tensor:
    """Mark `x` as the loss (spec 4.6.3): backpropagate a gradient of ones through it,
    after reducing it with `reduction` ("sum", "mean" or "none")."""
    if reduction not in _REDUCTIONS:
        raise Error(f"identity_loss reduction must be one of {', '.join(_REDUCTIONS)}, "
                    f"got {reduction!r}", type="api")
    loss = _identity_loss(x, reduction)
    caller = traceback.extract_stack(limit=2)[0]
    _loss_marks.append((loss, f"{caller.filename}:{caller.lineno}"))
    return loss
