"""poptorch.dynamic_slice and poptorch.dynamic_update (spec 4.6.6, 4.6.7): slices of a
static size at a start computed when the model runs.

Each is a torch.library custom op (`poptorch::dynamic_slice`, `poptorch::dynamic_update`)
that torch.export keeps whole; `ipu-convert-poptorch-ops` lowers it to
`ipu.dynamic_slice` / `ipu.dynamic_update` (passes/conversion/slicing.py), whose start
is an operand, so one compiled program slices wherever each call's data says.

Out-of-range starts do what popops does on the IPU (dialects/slicing.py): the start is
read as an unsigned 32-bit offset, an offset at or past the end of the dimension is 0,
and a slice running past the end wraps round to the dimension's start. The CPU
implementation here does the same, so that a model runs alike on both.

The argument checks and their messages are PopTorch's (graphcore/poptorch, python/ops.py
and poptorch/source/popart_canonicalization/SliceOps.cpp), each with what to change.
"""

from __future__ import annotations

import traceback

import torch

from poptorch.errors import Error


def _error(message: str) -> Error:
    """An API error located at the user's call (the frame calling the public function)."""
    frame = traceback.extract_stack(limit=3)[0]
    return Error(message, type="api", location=f"{frame.filename}:{frame.lineno}")


def _positions(start: torch.Tensor, extent: int, size: int) -> torch.Tensor:
    """The `size` positions along a dimension of `extent` a start selects, as popops
    reads its offset (module docstring)."""
    offset = int(start.reshape(-1)[0].item()) & 0xFFFFFFFF
    offset = 0 if offset >= extent else offset
    return (offset + torch.arange(size)) % extent


@torch.library.custom_op("poptorch::dynamic_slice", mutates_args=())
def _dynamic_slice(tensor: torch.Tensor, dim: int, start: torch.Tensor, size: int,
                   step: int) -> torch.Tensor:
    index = _positions(start, tensor.shape[dim], size)[::step]
    return tensor.index_select(dim, index.to(tensor.device)).contiguous()


@_dynamic_slice.register_fake
def _(tensor, dim, start, size, step):
    shape = list(tensor.shape)
    shape[dim] = -(-size // step)
    return tensor.new_empty(shape)


@torch.library.custom_op("poptorch::dynamic_update", mutates_args=())
def _dynamic_update(input: torch.Tensor, src: torch.Tensor, dim: int,  # noqa: A002
                    start: torch.Tensor, size: int) -> torch.Tensor:
    index = _positions(start, input.shape[dim], size)
    return input.index_copy(dim, index.to(input.device), src)


@_dynamic_update.register_fake
def _(input, src, dim, start, size):  # noqa: A002
    return torch.empty_like(input)


def _slice_backward(ctx, grad):
    """The slice's gradient: the incoming gradient written, at the same positions, into
    zeros of the input's shape (every `step`-th of the `size` positions when strided)."""
    tensor_shape, dim, start, size, step = ctx.saved
    if step > 1:
        shape = list(grad.shape)
        shape[dim] = size
        grad = grad.new_zeros(shape).slice_scatter(grad, dim, 0, size, step)
    zeros = grad.new_zeros(tensor_shape)
    return _dynamic_update(zeros, grad, dim, start, size), None, None, None, None


def _slice_context(ctx, inputs, output):
    tensor, dim, start, size, step = inputs
    ctx.saved = (tensor.shape, dim, start, size, step)


_dynamic_slice.register_autograd(_slice_backward, setup_context=_slice_context)


def _update_backward(ctx, grad):
    """The input's gradient is the incoming one with the updated positions zeroed; the
    source's is the incoming gradient at those positions."""
    src_shape, dim, start, size = ctx.saved
    grad_input = _dynamic_update(grad, grad.new_zeros(src_shape), dim, start, size)
    grad_src = _dynamic_slice(grad, dim, start, size, 1)
    return grad_input, grad_src, None, None, None


def _update_context(ctx, inputs, output):
    _, src, dim, start, size = inputs
    ctx.saved = (src.shape, dim, start, size)


_dynamic_update.register_autograd(_update_backward, setup_context=_update_context)


def _check_size(size: int, step: int | None = None) -> None:
    if size == 0:
        raise _error_at("The start and end of a slice must be different: size is 0; "
                        "pass a size of at least 1.")
    if size < 0:
        raise _error_at("Taking a slice of a tensor with the end less than the start is "
                        f"not supported: size is {size}; pass a positive size.")
    if step is not None and step < 1:
        raise _error_at(f"Slicing step must be at least 1, got {step}.")


def _error_at(message: str) -> Error:
    """As `_error`, one frame further out (called from a check the public function calls)."""
    frame = traceback.extract_stack(limit=4)[0]
    return Error(message, type="api", location=f"{frame.filename}:{frame.lineno}")


def _check_start(start, op: str) -> None:
    if not isinstance(start, torch.Tensor):
        raise _error_at(f"Slice start argument to {op} must be a torch.tensor. "
                        f"{type(start)} is not supported.")
    if start.numel() != 1 or start.dtype.is_floating_point or start.dtype.is_complex \
            or start.dtype == torch.bool:
        raise _error_at(f"The start of {op} must be an integer tensor of one element (the "
                        f"start index), got a {start.dtype} tensor of shape "
                        f"{list(start.shape)}.")


def _normalise_dim(dim, tensor: torch.Tensor) -> int:
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise _error_at("Dimension must be an integer.")
    rank = tensor.dim()
    if not -rank <= dim < rank:
        raise _error_at(f"Dimension {dim} is out of range for a tensor of {rank} "
                        f"dimensions; pass one in [{-rank}, {rank - 1}].")
    return dim + rank if dim < 0 else dim


def dynamic_slice(tensor: torch.Tensor, dim: int, start: torch.Tensor, size: int,
                  step: int) -> torch.Tensor:
    """The slice `tensor[start:start + size:step]` along `dim`, where `start` (an integer
    tensor of one element) is read when the model runs and `size`, `step` are constant
    ints (spec 4.6.6). `size` must divide the dimension (PopTorch's rule); a start at or
    past the end is 0, and a slice running past the end wraps round (popops)."""
    if not isinstance(tensor, torch.Tensor):
        raise _error(f"dynamic_slice must take a torch.tensor input. {type(tensor)} is "
                     "not supported.")
    dim = _normalise_dim(dim, tensor)
    _check_start(start, "dynamic_slice")
    if isinstance(size, bool) or not isinstance(size, int):
        raise _error("Size must be an integer.")
    if isinstance(step, bool) or not isinstance(step, int):
        raise _error("Step must be an integer.")
    _check_size(size, step)
    extent = tensor.shape[dim]
    if extent % size != 0:
        raise _error(f"The size of the slice ({size}) must be a factor of the slicing "
                     f"dimension ({extent}).")
    return _dynamic_slice(tensor, dim, start, size, step)


def dynamic_update(input: torch.Tensor, src: torch.Tensor, dim: int,  # noqa: A002
                   start: torch.Tensor, size: int) -> torch.Tensor:
    """A copy of `input` with `src` written along `dim` from `start` (an integer tensor
    of one element read when the model runs); `size` is src's constant extent along
    `dim` (spec 4.6.7). A start at or past the end is 0, and an update running past the
    end wraps round (popops)."""
    if not isinstance(input, torch.Tensor):
        raise _error(f"dynamic_update must take a torch.tensor input. {type(input)} is "
                     "not supported.")
    dim = _normalise_dim(dim, input)
    _check_start(start, "dynamic_update")
    if not isinstance(src, torch.Tensor):
        raise _error("Src argument to dynamic_update must be a torch.tensor. "
                     f"{type(src)} is not supported.")
    if isinstance(size, bool) or not isinstance(size, int):
        raise _error("Size must be an integer.")
    _check_size(size)
    if input.dim() != src.dim():
        raise _error("input and src tensors must have same dimensionality. "
                     f"({input.dim()}) vs ({src.dim()})")
    if input.dtype != src.dtype:
        raise _error(f"input and src tensor must have same dtype. ({input.dtype} vs "
                     f"{src.dtype})")
    expected = list(input.shape)
    expected[dim] = size
    if list(src.shape) != expected or size > input.shape[dim]:
        raise _error(f"src of shape {list(src.shape)} does not fit a slice of size {size} "
                     f"along dim {dim} of input {list(input.shape)}: src must have shape "
                     f"{expected}, and size at most {input.shape[dim]}.")
    return _dynamic_update(input, src, dim, start, size)
