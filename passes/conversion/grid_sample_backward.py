"""torch -> ipu: the gradient of grid sampling.

`aten.grid_sampler_2d_backward` (training spatial transformers, deformable attention,
optical flow), which torch-mlir has no op for, comes through `OPERATORS` (see
passes/conversion/__init__.py): the input gradient is an `ipu.scatter` sum of each
output's gradient into the (up to four) input pixels it read, the grid gradient the
derivative of the interpolation, gathered from the same pixels.

Like every lowering, it reads its constants and checks what it declines before it builds
any op.
"""

from __future__ import annotations

from torch_mlir import ir

from poptorch.dialects.data_movement import BroadcastOp, ConcatOp
from poptorch.dialects.elementwise import (
    BINARY_OPS,
    COMPARE_OPS,
    UNARY_OPS,
    CastOp,
    SelectOp,
    broadcast_shape,
)
from poptorch.dialects.indexing import GatherOp, ScatterOp
from poptorch.dialects.ipu import i64, make_bool
from poptorch.dialects.reduction import ReduceOp
from poptorch.dialects.types import Unsupported

from .common import Builder, Lowering
from .indexing import reshape_to, slice_along

GRID_INTERPOLATIONS = ("bilinear", "nearest", "bicubic")  # grid_sampler's integer modes
GRID_PADDINGS = ("zeros", "border", "reflection")


class _Emit:
    """Elementwise ipu ops on builtin tensors, each typed by broadcasting its operands
    (for the longer compositions)."""

    def __init__(self, b: Builder, element: ir.Type) -> None:
        self.b, self.element = b, element
        self.i1 = ir.IntegerType.get_signless(1)

    def _type(self, element: ir.Type, *values: ir.Value) -> ir.RankedTensorType:
        shape: list[int] = []
        for value in values:
            shape = broadcast_shape(shape, list(value.type.shape))
        return ir.RankedTensorType.get(shape, element)

    def const(self, value: float) -> ir.Value:
        return self.b.constant(value, self.element)

    def __call__(self, name: str, lhs: ir.Value, rhs: ir.Value | float) -> ir.Value:
        rhs = self.const(rhs) if isinstance(rhs, int | float) else rhs
        if name in COMPARE_OPS:
            return COMPARE_OPS[name](lhs, rhs, self._type(self.i1, lhs, rhs)).result
        element = lhs.type.element_type
        return BINARY_OPS[name](lhs, rhs, self._type(element, lhs, rhs)).result

    def unary(self, name: str, x: ir.Value) -> ir.Value:
        return UNARY_OPS[name](x, x.type).result

    def where(self, condition: ir.Value, lhs: ir.Value, rhs: ir.Value | float) -> ir.Value:
        rhs = self.const(rhs) if isinstance(rhs, int | float) else rhs
        return SelectOp(condition, lhs, rhs, self._type(lhs.type.element_type, condition, lhs,
                                                         rhs)).result

    def cast(self, x: ir.Value, element: ir.Type) -> ir.Value:
        return CastOp(x, ir.RankedTensorType.get(list(x.type.shape), element)).result


def grid_sampler_backward(op: ir.OpView, b: Builder) -> tuple[ir.Value, ir.Value]:
    """aten.grid_sampler_2d_backward(grad, x, grid, interpolation, padding, align_corners,
    output_mask) -> (grad_x, grad_grid), as PyTorch's CPU kernel computes them, for
    bilinear and nearest interpolation with zeros or border padding: output (h, w) reads
    x at (iy, ix), the grid point unnormalised (and clipped to the border, where the
    grid gradient is then 0); each corner within x gets the output's gradient times its
    interpolation weight (an ipu.scatter sum over the flattened pixels), and the grid
    gets the weights' derivative times the corner values (ipu.gather), summed over
    channels, times the unnormalisation's scale."""
    grad_x_type, grad_grid_type = b.result_type(0), b.result_type(1)
    interpolation = GRID_INTERPOLATIONS[b.scalar(op.operands[3])]
    padding = GRID_PADDINGS[b.scalar(op.operands[4])]
    align_corners = bool(b.scalar(op.operands[5]))
    if interpolation == "bicubic" or padding == "reflection":
        raise Unsupported(f"the gradient of grid sampling with {interpolation} "
                          f"interpolation and {padding} padding (bilinear or nearest with "
                          "zeros or border padding are supported)")
    if grad_x_type.rank != 4 or grad_grid_type.rank != 4:
        raise Unsupported("grid sampling of a tensor of rank other than 4")
    n, c, height, width = grad_x_type.shape
    out_h, out_w = grad_grid_type.shape[1:3]
    if height * width > 2**24:  # pixel indices are computed in float32 (exact to 2^24)
        raise Unsupported(f"grid sampling of {height}x{width} images (at most 2^24 pixels)")
    element = ir.F32Type.get()  # float16 too: its pixel indices would be inexact
    e = _Emit(b, element)
    grad = b.cast(b.tensor(op.operands[0]), element)
    x = b.cast(b.tensor(op.operands[1]), element)
    grid = b.cast(b.tensor(op.operands[2]), element)
    pixels = out_h * out_w

    def source(axis: int, size: int) -> tuple[ir.Value, ir.Value | float]:
        """The source coordinate along `axis` of the grid ([n, h, w]) and its derivative
        by the grid coordinate (a number, or a tensor where clipping zeroes it)."""
        coord = reshape_to(slice_along(grid, 3, axis, axis + 1), [n, out_h, out_w])
        if align_corners:  # ((coord + 1) / 2) * (size - 1)
            index = e("mul", e("div", e("add", coord, 1.0), 2.0), float(size - 1))
            derivative: ir.Value | float = (size - 1) / 2
        else:  # ((coord + 1) * size - 1) / 2
            index = e("div", e("sub", e("mul", e("add", coord, 1.0), float(size)), 1.0), 2.0)
            derivative = size / 2
        if padding == "border":  # clipped; no gradient where clipped (also at exactly 0)
            inside = e("logical_and", e("gt", index, 0.0), e("lt", index, float(size - 1)))
            derivative = e.where(inside, e.const(derivative), 0.0)
            index = e("min", e("max", index, 0.0), float(size - 1))
        return index, derivative

    def position(coord: ir.Value, size: int) -> tuple[ir.Value, ir.Value]:
        """Whether an integral coordinate is within [0, size), and it clamped there."""
        valid = e("logical_and", e("ge", coord, 0.0), e("le", coord, float(size - 1)))
        return valid, e("min", e("max", coord, 0.0), float(size - 1))

    ix, gix_mult = source(0, width)
    iy, giy_mult = source(1, height)
    i32 = ir.IntegerType.get_signless(32)
    flat_x = reshape_to(x, [n, c, height * width])
    per_channel = ir.RankedTensorType.get([n, c, pixels], element)
    flat_grad = reshape_to(grad, [n, c, pixels])

    def channels(value: ir.Value) -> ir.Value:
        """A per-pixel value ([n, h, w]) as [n, 1, h * w], to broadcast over channels."""
        return reshape_to(value, [n, 1, pixels])

    if interpolation == "nearest":
        xs, ys = [e.unary("round", ix)], [e.unary("round", iy)]
        corners = [(0, 0, None)]
    else:
        x0, y0 = e.unary("floor", ix), e.unary("floor", iy)
        xs, ys = [x0, e("add", x0, 1.0)], [y0, e("add", y0, 1.0)]
        wx = [e("sub", xs[1], ix), e("sub", ix, x0)]  # the weights of x0 and x1
        wy = [e("sub", ys[1], iy), e("sub", iy, y0)]
        # nw, ne, sw, se: (x, y, signs of d weight / d ix and d iy)
        corners = [(0, 0, (-1, -1)), (1, 0, (1, -1)), (0, 1, (-1, 1)), (1, 1, (1, 1))]
    xs = [position(v, width) for v in xs]
    ys = [position(v, height) for v in ys]
    sources, indices = [], []
    gix = giy = None
    for kx, ky, signs in corners:
        (valid_x, cx), (valid_y, cy) = xs[kx], ys[ky]
        valid = e("logical_and", valid_x, valid_y)
        flat = e.where(valid, e("add", e("mul", cy, float(width)), cx), 0.0)
        index = BroadcastOp(channels(e.cast(flat, i32)),
                            ir.RankedTensorType.get([n, c, pixels], i32)).result
        if signs is None:
            share = e.where(channels(valid), flat_grad, 0.0)
        else:
            weight = e.where(valid, e("mul", wx[kx], wy[ky]), 0.0)
            share = e("mul", flat_grad, channels(weight))
            value = e.where(channels(valid),
                            GatherOp(flat_x, index, i64(2), per_channel).result, 0.0)
            # d (wx * wy) / d ix = sx * wy, / d iy = sy * wx; terms (value * w) * grad
            gix = _accumulate(e, gix, e("mul", e("mul", value, channels(wy[ky])), flat_grad),
                              signs[0])
            giy = _accumulate(e, giy, e("mul", e("mul", value, channels(wx[kx])), flat_grad),
                              signs[1])
        sources.append(reshape_to(share, [n, c, pixels, 1]))
        indices.append(reshape_to(index, [n, c, pixels, 1]))
    count = len(sources)
    src, idx = sources[0], indices[0]
    for k in range(1, count):  # per pixel, its corners in order (PyTorch's order of adds)
        src = ConcatOp(src, sources[k], i64(3),
                       ir.RankedTensorType.get([n, c, pixels, k + 1], element)).result
        idx = ConcatOp(idx, indices[k], i64(3),
                       ir.RankedTensorType.get([n, c, pixels, k + 1], i32)).result
    zeros = b.constant(0, element, [n, c, height * width])
    grad_x = ScatterOp(zeros, reshape_to(idx, [n, c, pixels * count]),
                       reshape_to(src, [n, c, pixels * count]), i64(2),
                       ir.StringAttr.get("sum"), make_bool(True),
                       zeros.type).result
    grad_x = reshape_to(grad_x, [n, c, height, width])
    if gix is None:
        grad_grid = b.constant(0, element, list(grad_grid_type.shape))
    else:
        parts = []
        for total, mult in ((gix, gix_mult), (giy, giy_mult)):
            summed = ReduceOp(total, ir.StringAttr.get("sum"), ir.DenseI64ArrayAttr.get([1]),
                              make_bool(False), ir.RankedTensorType.get([n, pixels], element))
            parts.append(reshape_to(e("mul", reshape_to(summed.result, [n, out_h, out_w]), mult),
                                  [n, out_h, out_w, 1]))
        grad_grid = ConcatOp(parts[0], parts[1], i64(3),
                             ir.RankedTensorType.get([n, out_h, out_w, 2], element)).result
    return (b.cast(grad_x, grad_x_type.element_type),
            b.cast(grad_grid, grad_grid_type.element_type))


def _accumulate(e: _Emit, total: ir.Value | None, term: ir.Value, sign: float) -> ir.Value:
    """total + sign * term, starting from the first term."""
    if total is None:
        return e.unary("neg", term) if sign < 0 else term
    return e("add" if sign > 0 else "sub", total, term)


# aten ops torch-mlir has no op for: `torch.operator "<name>"` -> lowering
OPERATORS: dict[str, Lowering] = {"torch.aten.grid_sampler_2d_backward": grid_sampler_backward}
