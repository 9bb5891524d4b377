"""torch -> ipu: convolutions, pooling, padding and upsampling.

`aten.convolution` becomes `ipu.conv` or `ipu.conv_transpose` plus a broadcast `ipu.add`
of the bias; a zero `aten.constant_pad_nd` of the spatial dims feeding a convolution
(what `padding='same'` with an even kernel gives) folds into the convolution's padding.
Pooling keeps PyTorch's attributes (`ipu.max_pool`, `ipu.max_pool_with_indices`,
`ipu.avg_pool`); the adaptive pooling ops torch-mlir leaves whole become
`ipu.adaptive_max_pool` (`ipu.adaptive_max_pool_with_indices` when a gradient uses the
indices) / `ipu.adaptive_avg_pool`. `aten.constant_pad_nd` is `ipu.pad`,
and a nearest 2-d `aten.__interpolate` is `ipu.upsample_nearest`.

Antialiased bilinear and bicubic resampling (`aten._upsample_{bilinear,bicubic}2d_aa`,
which timm's position-embedding resampling and `interpolate(..., antialias=True)` use)
and their gradients have no torch-mlir op: they arrive as opaque `torch.operator`s,
lowered through `OPERATORS` (see passes/conversion/__init__.py). Resampling is
separable, so each is two `ipu.matmul` with constant matrices of PyTorch's filter
weights: `A_h @ x @ A_w^T`, and the input gradient `A_h^T @ grad @ A_w`.

Every lowering reads and checks its constant operands before it builds anything: one
that declines (`Unsupported`) after building ops would leave them behind, and the
greedy driver, seeing the IR change, would retry it until it gives up on converging.
"""

from __future__ import annotations

from functools import partial

import numpy as np
from torch_mlir import ir

from poptorch.dialects.convolution import (
    AdaptiveAvgPoolOp,
    AdaptiveMaxPoolOp,
    AvgPoolOp,
    ConvOp,
    ConvTransposeOp,
    MaxPoolOp,
    MaxPoolWithIndicesOp,
    PadOp,
    UpsampleNearestOp,
)
from poptorch.dialects.convolution_backward import AdaptiveMaxPoolWithIndicesOp
from poptorch.dialects.data_movement import ReshapeOp
from poptorch.dialects.elementwise import BINARY_OPS
from poptorch.dialects.ipu import i64, make_bool
from poptorch.dialects.linear import MatMulOp
from poptorch.dialects.types import Unsupported, builtin_type

from .common import Builder, Lowering, Patterns
from .elementwise import operand


def array(values: list[int]) -> ir.DenseI64ArrayAttr:
    return ir.DenseI64ArrayAttr.get([int(v) for v in values])


def per_dim(b: Builder, value: ir.Value, count: int, what: str,
            default: list[int] | None = None) -> list[int]:
    """A constant int list with one entry per spatial dim (a single entry is repeated)."""
    values = b.scalar_list(value)
    if not values and default is not None:
        return default
    if len(values) == 1:
        values = values * count
    if len(values) != count:
        raise Unsupported(f"{what} {values} needs {count} entries")
    return values


def zero_padding(b: Builder, value: ir.Value, spatial: int) -> tuple[ir.Value, list[int],
                                                                       list[int]] | None:
    """If `value` is an `aten.constant_pad_nd` by zeros of only the trailing `spatial` dims
    by non-negative amounts (what padding='same' with an even kernel gives): its input and
    the low and high padding. (The conversion rewrites users before producers, so the
    pad is still a torch op here; once unused, canonicalize drops it.)"""
    owner = value.owner
    if not (isinstance(owner, ir.OpView)
            and owner.operation.name == "torch.aten.constant_pad_nd"):
        return None
    pad = b.scalar_list(owner.operands[1])
    if b.scalar(owner.operands[2]) != 0 or len(pad) > 2 * spatial or min(pad, default=0) < 0:
        return None
    pad = [0] * (2 * spatial - len(pad)) + pad[::-1]  # (high, low) from the first dim
    return owner.operands[0], pad[1::2], pad[0::2]


def convolution(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.convolution(input, weight, bias?, stride, padding, dilation, transposed,
    output_padding, groups)."""
    out = b.result_type()
    d = builtin_type(op.operands[1].type).rank - 2
    if d < 1 or builtin_type(op.operands[0].type).rank != d + 2:
        raise Unsupported(f"convolution of {op.operands[0].type} by {op.operands[1].type} "
                          "(expected N, C, spatial... and C_out, C_in, kernel...)")
    strides, padding, dilations = (per_dim(b, op.operands[i], d, name) for i, name in
                                   ((3, "stride"), (4, "padding"), (5, "dilation")))
    groups = i64(b.scalar(op.operands[8]))
    if b.scalar(op.operands[6]):
        output_padding = per_dim(b, op.operands[7], d, "output_padding", [0] * d)
        x, weight = (operand(b, v, out.element_type) for v in op.operands[:2])
        y = ConvTransposeOp(x, weight, array(strides), array(padding), array(output_padding),
                            array(dilations), groups, out).result
    else:
        source, low, high = zero_padding(b, op.operands[0], d) or (op.operands[0], [0] * d,
                                                                    [0] * d)
        low = [p + extra for p, extra in zip(padding, low, strict=True)]
        high = [p + extra for p, extra in zip(padding, high, strict=True)]
        x, weight = (operand(b, v, out.element_type) for v in (source, op.operands[1]))
        y = ConvOp(x, weight, array(strides), array(low), array(high), array(dilations), groups,
                   out).result
    if b.is_none(op.operands[2]):
        return y
    bias = operand(b, op.operands[2], out.element_type)
    shape = [bias.type.shape[0]] + [1] * d
    bias = ReshapeOp(bias, ir.RankedTensorType.get(shape, out.element_type)).result
    return BINARY_OPS["add"](y, bias, out).result


def pool_attrs(b: Builder, op: ir.OpView, d: int) -> tuple[list[int], ...]:
    """kernel, stride (defaults to the kernel when empty) and padding of a pooling op."""
    kernel = per_dim(b, op.operands[1], d, "kernel_size")
    strides = per_dim(b, op.operands[2], d, "stride", kernel)
    padding = per_dim(b, op.operands[3], d, "padding")
    return kernel, strides, padding


def max_pool(d: int, op: ir.OpView, b: Builder) -> ir.Value | list[ir.Value]:
    """aten.max_pool{d}d(input, kernel_size, stride, padding, dilation, ceil_mode), and
    max_pool{d}d_with_indices."""
    kernel, strides, padding = pool_attrs(b, op, d)
    dilations = per_dim(b, op.operands[4], d, "dilation")
    attrs = (array(kernel), array(strides), array(padding), array(dilations),
             make_bool(b.scalar(op.operands[5])))
    x = b.tensor(op.operands[0])
    if len(op.results) == 1:
        return MaxPoolOp(x, *attrs, b.result_type()).result
    pool = MaxPoolWithIndicesOp(x, *attrs, b.result_type(0), b.result_type(1))
    return [pool.output, pool.indices]


def avg_pool(d: int, op: ir.OpView, b: Builder) -> ir.Value:
    """aten.avg_pool{d}d(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
    divisor_override?) (avg_pool1d has no divisor_override)."""
    kernel, strides, padding = pool_attrs(b, op, d)
    ceil_mode, include_pad = (make_bool(b.scalar(v)) for v in op.operands[4:6])
    divisor = b.scalar(op.operands[6]) if len(op.operands) > 6 else None
    if divisor is not None and divisor < 1:
        raise Unsupported(f"divisor_override {divisor} must be positive")
    return AvgPoolOp(b.tensor(op.operands[0]), array(kernel), array(strides), array(padding),
                     ceil_mode, include_pad, i64(divisor or 0), b.result_type()).result


def adaptive_pool(kind: str, op: ir.OpView, b: Builder) -> ir.Value | list[ir.Value]:
    """aten._adaptive_avg_pool3d(input, output_size) and aten.adaptive_max_pool2d/3d, whose
    indices (what its gradient scatters to) are computed only when used (else they become
    a splat constant that canonicalize drops)."""
    out = b.result_type()
    d = len(b.scalar_list(op.operands[1]))
    size = array(out.shape[out.rank - d:])
    if kind == "avg":
        return AdaptiveAvgPoolOp(b.tensor(op.operands[0]), size, out).result
    indices = b.result_type(1)
    if list(op.results[1].uses):
        pool = AdaptiveMaxPoolWithIndicesOp(b.tensor(op.operands[0]), size, out, indices)
        return [pool.output, pool.indices]
    return [AdaptiveMaxPoolOp(b.tensor(op.operands[0]), size, out).result,
            b.constant(0, indices.element_type, indices.shape)]


def constant_pad(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.constant_pad_nd(input, pad, value): pad lists (low, high) from the last dim."""
    out = b.result_type()
    pad = b.scalar_list(op.operands[1])
    if len(pad) % 2 or len(pad) > 2 * out.rank:
        raise Unsupported(f"pad {pad} needs an even number of entries, at most {2 * out.rank}")
    low, high = [0] * out.rank, [0] * out.rank
    for i in range(len(pad) // 2):
        low[out.rank - 1 - i], high[out.rank - 1 - i] = pad[2 * i], pad[2 * i + 1]
    value = ir.FloatAttr.get_f64(float(b.scalar(op.operands[2])))
    return PadOp(b.tensor(op.operands[0]), array(low), array(high), value,
                 ir.StringAttr.get("constant"), out).result


def interpolate(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.__interpolate.size_list_scale_list(input, size?, scale_factor?, mode,
    align_corners?, recompute_scale_factor?, antialias) in "nearest" mode."""
    mode = b.scalar(op.operands[3])
    if mode != "nearest":
        raise Unsupported(f"interpolation mode '{mode}' (only 'nearest' is supported)")
    if b.scalar(op.operands[6]):
        raise Unsupported("antialiased interpolation")
    out = b.result_type()
    d = out.rank - 2
    if d != 2:
        raise Unsupported(f"nearest interpolation of {d} spatial dims (torch-mlir's "
                          "decompositions turn 1-d and 3-d ones into gathers)")
    scales = [0.0] * d
    if not b.is_none(op.operands[2]) and not b.scalar(op.operands[5]):
        scales = [float(s) for s in per_dim(b, op.operands[2], d, "scale_factor")]
    return UpsampleNearestOp(b.tensor(op.operands[0]), ir.DenseF64ArrayAttr.get(scales),
                             out).result


def _area_scale(in_size: int, out_size: int, align_corners: bool,
                scale: float | None) -> np.float32:
    """PyTorch's `area_pixel_compute_scale` (in float32, as its kernel computes it for
    float32 tensors): input pixels per output pixel."""
    if align_corners:
        return np.float32(in_size - 1) / np.float32(out_size - 1) if out_size > 1 \
            else np.float32(0)
    if scale is not None and scale > 0:
        return np.float32(1.0 / scale)
    return np.float32(in_size) / np.float32(out_size)


def _triangle(x: np.ndarray) -> np.ndarray:
    x = np.abs(x.astype(np.float64))
    return np.where(x < 1, 1 - x, 0).astype(np.float32)


def _keys_cubic(x: np.ndarray) -> np.ndarray:
    """Keys' cubic convolution kernel with a = -0.5 (PIL's, and PyTorch's antialiased
    bicubic; its plain bicubic uses -0.75)."""
    a = -0.5
    x = np.abs(x.astype(np.float64))
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    far = (((x - 5) * x + 8) * x - 4) * a
    return np.where(x < 1, near, np.where(x < 2, far, 0)).astype(np.float32)


AA_FILTERS = {"bilinear": (_triangle, 2), "bicubic": (_keys_cubic, 4)}


def antialias_weights(kind: str, in_size: int, out_size: int, align_corners: bool,
                      scale: float | None) -> np.ndarray:
    """The [out_size, in_size] float32 matrix of PyTorch's antialiased resampling along
    one dim (aten/src/ATen/native/cpu/UpSampleKernel.cpp, `_compute_weights_aa`, with
    its float32 centres, supports and sums, so within a few float32 ulps of its
    weights): output i reads the inputs within `support` of its centre, weighted by
    the filter (widened by the scale when downsampling) and normalised to sum 1."""
    fn, interp_size = AA_FILTERS[kind]
    f32 = np.float32
    s = _area_scale(in_size, out_size, align_corners, scale)
    support = f32(interp_size * 0.5 * float(s)) if s >= 1 else f32(interp_size * 0.5)
    max_size = int(np.ceil(support)) * 2 + 1
    invscale = f32(1.0 / float(s)) if s >= 1 else f32(1)
    weights = np.zeros((out_size, in_size), np.float32)
    for i in range(out_size):
        center = f32(float(s) * (i + 0.5))
        low = max(int(float(center - support) + 0.5), 0)
        size = min(max(min(int(float(center + support) + 0.5), in_size) - low, 0), max_size)
        offsets = np.arange(low, low + size, dtype=np.float32) - center
        w = fn(((offsets.astype(np.float64) + 0.5) * float(invscale)).astype(np.float32))
        total = f32(0)
        for v in w:  # in order, in float32, as the kernel sums them
            total = f32(total + v)
        weights[i, low:low + size] = w / total if total != 0 else w
    return weights


def upsample_antialiased(kind: str, backward: bool, op: ir.OpView, b: Builder) -> ir.Value:
    """aten._upsample_{bilinear,bicubic}2d_aa(x, output_size, align_corners, scales_h?,
    scales_w?) as `A_h @ x @ A_w^T`, and its _backward(grad, output_size, input_size,
    align_corners, scales_h?, scales_w?) as `A_h^T @ grad @ A_w` (constant matrices of
    `antialias_weights`)."""
    out = b.result_type()
    t = builtin_type(op.operands[0].type)
    if out.rank != 4 or t.rank != 4:
        raise Unsupported(f"antialiased resampling of rank {t.rank} (2 spatial dims expected)")
    output_size = per_dim(b, op.operands[1], 2, "output_size")
    first = 3 if backward else 2  # align_corners
    input_size = b.scalar_list(op.operands[2])[2:] if backward else list(t.shape[2:])
    align_corners = bool(b.scalar(op.operands[first]))
    scales = [b.scalar(v) for v in op.operands[first + 1:first + 3]]
    if any(not isinstance(n, int) or n < 1 for n in [*output_size, *input_size]):
        raise Unsupported(f"resampling {input_size} to {output_size}")
    result = operand(b, op.operands[0], out.element_type)
    for dim, n, m, scale in zip((2, 3), input_size, output_size, scales, strict=True):
        weights = antialias_weights(kind, n, m, align_corners, scale)
        result = map_dim(b, result, dim, weights.T if backward else weights)
    return result


def map_dim(b: Builder, x: ir.Value, dim: int, matrix: np.ndarray) -> ir.Value:
    """`x` with dim `dim` mapped by the constant `matrix` [new, old]: out[.., i, ..] =
    sum_j matrix[i, j] * x[.., j, ..]. One ipu.matmul: `x @ matrix^T` for the last dim,
    `matrix @ x` for the others (x seen as [.., old, the dims after it]); nothing for
    the identity."""
    rows, cols = matrix.shape
    if rows == cols and np.array_equal(matrix, np.eye(rows, dtype=matrix.dtype)):
        return x
    shape, element = list(x.type.shape), x.type.element_type
    if dim == len(shape) - 1:
        return MatMulOp(x, b.constant(matrix.T, element, [cols, rows]),
                        ir.RankedTensorType.get([*shape[:-1], rows], element)).result
    tail = int(np.prod(shape[dim + 1:], dtype=np.int64))
    viewed = _reshape(x, [*shape[:dim], cols, tail])
    product = MatMulOp(b.constant(matrix, element, [rows, cols]), viewed,
                       ir.RankedTensorType.get([*shape[:dim], rows, tail], element)).result
    return _reshape(product, [*shape[:dim], rows, *shape[dim + 1:]])


def _reshape(x: ir.Value, shape: list[int]) -> ir.Value:
    if list(x.type.shape) == shape:
        return x
    return ReshapeOp(x, ir.RankedTensorType.get(shape, x.type.element_type)).result


# aten ops torch-mlir has no op for: `torch.operator "<name>"` -> lowering
OPERATORS: dict[str, Lowering] = {
    f"torch.aten._upsample_{kind}2d_aa{suffix}": partial(upsample_antialiased, kind, backward)
    for kind in AA_FILTERS for suffix, backward in (("", False), ("_backward", True))}


def populate_convolution(patterns: Patterns) -> None:
    """Register the convolution, pooling, padding and upsampling lowerings."""
    patterns.lower("torch.aten.convolution", convolution)
    for d in (1, 2, 3):
        patterns.lower(f"torch.aten.max_pool{d}d", partial(max_pool, d))
        patterns.lower(f"torch.aten.avg_pool{d}d", partial(avg_pool, d))
    for d in (2, 3):
        patterns.lower(f"torch.aten.max_pool{d}d_with_indices", partial(max_pool, d))
    patterns.lower("torch.aten._adaptive_avg_pool3d", partial(adaptive_pool, "avg"))
    for d in (2, 3):
        patterns.lower(f"torch.aten.adaptive_max_pool{d}d", partial(adaptive_pool, "max"))
    patterns.lower("torch.aten.constant_pad_nd", constant_pad)
    patterns.lower("torch.aten.__interpolate.size_list_scale_list", interpolate)
