"""torch -> ipu: convolutions, pooling, padding and nearest upsampling.

`aten.convolution` becomes `ipu.conv` or `ipu.conv_transpose` plus a broadcast `ipu.add`
of the bias; a zero `aten.constant_pad_nd` of the spatial dims feeding a convolution
(what `padding='same'` with an even kernel gives) folds into the convolution's padding.
Pooling keeps PyTorch's attributes (`ipu.max_pool`, `ipu.max_pool_with_indices`,
`ipu.avg_pool`); the adaptive pooling ops torch-mlir leaves whole become
`ipu.adaptive_max_pool` (`ipu.adaptive_max_pool_with_indices` when a gradient uses the
indices) / `ipu.adaptive_avg_pool`. `aten.constant_pad_nd` is `ipu.pad`,
and a nearest 2-d `aten.__interpolate` is `ipu.upsample_nearest`.

Every lowering reads and checks its constant operands before it builds anything: one
that declines (`Unsupported`) after building ops would leave them behind, and the
greedy driver, seeing the IR change, would retry it until it gives up on converging.
"""

from __future__ import annotations

from functools import partial

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

from .common import Builder, Patterns, Unsupported, builtin_type
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
