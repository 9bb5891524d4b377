"""poptorch.serializedMatMul (spec 4.6.8): a matrix product split into `factor` smaller
products computed one after the other, to lower its temporary memory.

A torch.library custom op (`poptorch::serialized_matmul`) that `ipu-convert-poptorch-ops`
lowers to `ipu.serialized_matmul` (passes/conversion/matmul_serialization.py). Its
gradients are serialised as PopART serialises them (graphcore/popart,
tests/popart/transformation_tests/serializematmul.py): over InputChannels the lhs
gradient splits its rows and the rhs gradient its reduction; over ReducingDim the lhs
gradient splits its columns and the rhs gradient its rows; over OutputChannels the lhs
gradient splits its reduction and the rhs gradient its columns.

Half-precision slices over the reducing dimension are each computed with fp32 partials
(as the IPU's AMP) and rounded to half; their sum is in half unless `keep_precision`,
which keeps it in fp32 (spec). The CPU implementation here does the same as the JIT.
"""

from __future__ import annotations

import traceback

import torch

from poptorch.enums import MatMulSerializationMode
from poptorch.errors import Error

# each mode's words in PopART's error, and the modes of the lhs and rhs gradients
_DIM_NAMES = {"input_channels": "input channels", "reducing_dim": "reducing",
              "output_channels": "output channels"}
_GRADIENT_MODES = {"input_channels": ("input_channels", "reducing_dim"),
                   "reducing_dim": ("output_channels", "input_channels"),
                   "output_channels": ("reducing_dim", "output_channels")}


def serial_product(lhs: torch.Tensor, rhs: torch.Tensor, mode: str, factor: int,
                   keep_precision: bool) -> torch.Tensor:
    """lhs @ rhs as `factor` products of slices, one after the other."""
    if mode == "input_channels":
        return torch.cat([a @ rhs for a in lhs.chunk(factor, dim=-2)], dim=-2)
    if mode == "output_channels":
        return torch.cat([lhs @ b for b in rhs.chunk(factor, dim=-1)], dim=-1)
    total = None
    for a, b in zip(lhs.chunk(factor, dim=-1), rhs.chunk(factor, dim=-2), strict=True):
        product = a.float() @ b.float()  # the AMP's fp32 partials
        if not keep_precision:
            product = product.to(lhs.dtype)  # each slice's result in the operands' type
        total = product if total is None else total + product
    return total.to(lhs.dtype)


@torch.library.custom_op("poptorch::serialized_matmul", mutates_args=())
def _serialized_matmul(lhs: torch.Tensor, rhs: torch.Tensor, mode: str, factor: int,
                       keep_precision: bool) -> torch.Tensor:
    return serial_product(lhs, rhs, mode, factor, keep_precision)


@_serialized_matmul.register_fake
def _(lhs, rhs, mode, factor, keep_precision):
    return torch.matmul(lhs, rhs)


def _sum_to(gradient: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """A gradient summed over the batch dimensions broadcasting added to an operand."""
    extra = gradient.dim() - len(shape)
    if extra:
        gradient = gradient.sum(dim=tuple(range(extra)))
    dims = tuple(d for d, size in enumerate(shape) if size == 1 and gradient.shape[d] != 1)
    return gradient.sum(dim=dims, keepdim=True) if dims else gradient


def _backward(ctx, grad):
    lhs, rhs = ctx.saved_tensors
    lhs_mode, rhs_mode = _GRADIENT_MODES[ctx.mode]
    grad_lhs = _serialized_matmul(grad, rhs.transpose(-1, -2), lhs_mode, ctx.factor,
                                  ctx.keep_precision)
    grad_rhs = _serialized_matmul(lhs.transpose(-1, -2), grad, rhs_mode, ctx.factor,
                                  ctx.keep_precision)
    return _sum_to(grad_lhs, lhs.shape), _sum_to(grad_rhs, rhs.shape), None, None, None


def _context(ctx, inputs, output):
    lhs, rhs, ctx.mode, ctx.factor, ctx.keep_precision = inputs
    ctx.save_for_backward(lhs, rhs)


_serialized_matmul.register_autograd(_backward, setup_context=_context)


def _error(message: str) -> Error:
    """An API error located at the user's call of serializedMatMul."""
    frame = traceback.extract_stack(limit=3)[0]
    return Error(message, type="api", location=f"{frame.filename}:{frame.lineno}")


def serializedMatMul(lhs: torch.Tensor, rhs: torch.Tensor,  # noqa: N802 - PopTorch's name
                     mode: MatMulSerializationMode, factor: int = 0,
                     keep_precision: bool = False) -> torch.Tensor:
    """The matrix product `lhs @ rhs` split over the dimension `mode` names into `factor`
    products calculated one after the other (spec 4.6.8): for lhs (m x n) and rhs
    (n x p), InputChannels splits m, ReducingDim n, OutputChannels p; Disabled is the
    ordinary product. `factor` must divide that dimension. `keep_precision` (half
    inputs) sums the partial products in float32 rather than half."""
    if not isinstance(mode, MatMulSerializationMode):
        raise _error(f"serializedMatMul: mode must be a poptorch.MatMulSerializationMode "
                     f"(InputChannels, ReducingDim, OutputChannels or Disabled), got {mode!r}")
    if isinstance(factor, bool) or not isinstance(factor, int):
        raise _error(f"serializedMatMul: factor must be an int, got {factor!r}")
    if not isinstance(keep_precision, bool):
        raise _error(f"serializedMatMul: keep_precision must be a bool, got {keep_precision!r}")
    if not isinstance(lhs, torch.Tensor) or not isinstance(rhs, torch.Tensor):
        raise _error(f"serializedMatMul takes two tensors, got {type(lhs).__name__} and "
                     f"{type(rhs).__name__}")
    if mode is MatMulSerializationMode.Disabled:
        if factor > 1:
            raise _error(f"serializedMatMul: factor {factor} has no effect with "
                         "MatMulSerializationMode.Disabled; pass a mode to serialise, or "
                         "factor 0")
        return torch.matmul(lhs, rhs)
    if lhs.dim() < 2 or rhs.dim() < 2:
        raise _error(f"serializedMatMul needs matrices (rank >= 2), got shapes "
                     f"{list(lhs.shape)} and {list(rhs.shape)}")
    name = mode.value
    extent = {"input_channels": lhs.shape[-2], "reducing_dim": lhs.shape[-1],
              "output_channels": rhs.shape[-1]}[name]
    if factor < 1 or extent % factor:
        raise _error(f"Invalid serialisation factor {factor} for {_DIM_NAMES[name]} dim "
                     f"{extent}. {name} dim should be a multple of the serialisation "
                     f"factor; pass a factor that divides {extent}")
    return _serialized_matmul(lhs, rhs, name, factor, keep_precision)
