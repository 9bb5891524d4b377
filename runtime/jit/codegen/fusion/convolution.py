"""Convolutions as compiled window kernels: the windows a convolution or its weight
gradient multiplies (im2col), and the taps' products a transposed convolution adds into
place (col2im), each with the BLAS products around it (`Convolution`,
`TransposedConvolution`: what the program calls).

A convolution and its weight gradient are BLAS products of the weight (or the output's
gradient) with the input's windows laid out as a matrix (channels x taps, images x
pixels). NumPy gathers them by padding the input (a copy) and copying each tap's
strided view; the kernel here writes the matrix in one pass, zeros for the taps in
the padding and a contiguous copy along each row for stride 1 (32 images of 16x16x16
with a 3x3 kernel: 0.25 ms against NumPy's 0.98). `Convolution` makes the products.
A transposed convolution (a convolution's input gradient) is a product giving every
tap's contribution, which a kernel adds into the output in its final layout, zeroed
and cropped as it goes (col2im), instead of NumPy's strided add per tap into a padded
output and a copy out of it (a CNN's 32x32x16x16 gradient: 2.1 against 3.5 ms).

Convolutions of f32 whose windows have at least FUSE_MIN_ELEMENTS elements are
compiled, except pointwise ones over planes of at least POINTWISE_PIXELS pixels (a
product per image needs no windows); the rest stay NumPy kernels.
"""

from __future__ import annotations

import math

import numpy as np
from torch_mlir import ir

from poptorch.dialects import op_class
from poptorch.dialects.convolution import ConvOp
from poptorch.dialects.convolution_backward import ConvWeightGradOp
from poptorch.runtime.jit.codegen.fusion.group import (
    FUSE_MIN_ELEMENTS,
    Group,
    Kind,
    row_strides,
    storage,
)
from poptorch.runtime.jit.codegen.fusion.lines import Lines, header
from poptorch.runtime.jit.kernels import kernel_of
from poptorch.runtime.jit.kernels.convolution import pointwise

POINTWISE_PIXELS = 64  # a pointwise convolution's output pixels from which it is per image


# ---- convolutions: the windows of the input (im2col) as a compiled kernel -----------------
def _geometry(op: ir.Operation) -> tuple:
    """(input shape, kernel, output spatial dims, strides, low padding, dilations, groups)
    of a convolution or its weight gradient."""
    source = tuple(op.operands[0].type.shape)
    if op_class(op) is ConvOp:
        kernel = tuple(op.operands[1].type.shape[2:])
        outputs = tuple(op.results[0].type.shape[2:])
    else:  # the weight gradient: the kernel is its result's, the outputs its gradient's
        kernel = tuple(op.results[0].type.shape[2:])
        outputs = tuple(op.operands[1].type.shape[2:])
    strides, low, dilations = ([int(x) for x in op.attributes[name]]
                               for name in ("strides", "padding_low", "dilations"))
    return (source, kernel, outputs, strides, low, dilations,
            int(op.attributes["groups"].value))


def _per_image(op: ir.Operation, kernel, outputs, strides, low, high, groups) -> bool:
    """Whether the op is a pointwise convolution (or its transposed form) over planes of
    at least POINTWISE_PIXELS pixels, which the NumPy kernel makes one product per image
    in place (`kernels.convolution.pointwise`): for 32 images of 16 x 16 pixels 2.5x
    faster than the window matrix's product and its transposes, as fast for 4 x 4."""
    return op_class(op) is not ConvWeightGradOp and math.prod(outputs) >= POINTWISE_PIXELS \
        and pointwise(kernel, strides, low, high, groups)


def convolution_group(op: ir.Operation) -> Group | None:
    """A convolution (or its weight gradient) of f32 whose windows the kernel module
    gathers (`im2col`), or None."""
    types = [storage(v.type) for v in list(op.operands) + list(op.results)]
    if types != ["f32"] * 3 or op.operands[0].type.rank < 3:
        return None
    source, kernel, outputs, strides, low, _, groups = _geometry(op)
    if source[0] * math.prod(outputs) * source[1] * math.prod(kernel) < FUSE_MIN_ELEMENTS or \
            _per_image(op, kernel, outputs, strides, low,
                       [int(x) for x in op.attributes["padding_high"]], groups):
        return None
    return Group(tuple(op.results[0].type.shape), [op], inputs=list(op.operands),
                 outputs=list(op.results), kind=Kind.WINDOW)


def columns_shape(op: ir.Operation) -> tuple[int, int]:
    """The windows' matrix of one replica: (channels x taps, images x output pixels)."""
    source, kernel, outputs, *_ = _geometry(op)
    return source[1] * math.prod(kernel), source[0] * math.prod(outputs)


def im2col_io(op: ir.Operation) -> tuple[list, list]:
    """The im2col function's input (the convolution's input alone) and output (the
    windows' matrix), as `FusedKernel` takes them."""
    x = op.operands[0].type
    return ([(math.prod(x.shape), x.rank, np.dtype(np.float32))],
            [(columns_shape(op), np.dtype(np.float32))])


def im2col_split(op: ir.Operation) -> tuple[int, int]:
    """The im2col function's outer parallel loop (`FusedKernel`'s split): the channels."""
    return op.operands[0].type.shape[1], 0


def im2col(name: str, op: ir.Operation) -> str:
    """cols[c, tap, n, pixel] = x[n, c, pixel * stride - padding + tap * dilation], 0
    outside x, for the input x (N, C, *S) of one replica: loops over channels, taps,
    images and the output's rows; along a row, the pixels whose tap lies before x, then
    those inside (a copy, contiguous for stride 1), then those after."""
    source, kernel, outputs, strides, low, dilations, _ = _geometry(op)
    n_images, channels, spatial = source[0], source[1], source[2:]
    d = len(spatial)
    taps, pixels = math.prod(kernel), math.prod(outputs)
    b = Lines()
    zero = b.const("0.0 : f32")
    pick, compare = b.pick, b.compare

    def fill(lower: str, upper: str, row: str) -> None:
        o = b.loop_from(lower, upper)
        b.store(zero, "%out0", b.emit(f"arith.addi {row}, {o} : i64"), "f32")
        b.close()

    replica = b.loop("%replicas")
    x_replica = b.emit(f"arith.muli {replica}, %step0 : i64")
    cols_replica = b.index(None, [(replica, channels * taps * n_images * pixels)])
    channel = b.split(replica, channels)
    tap = [b.loop(k) for k in kernel]
    tap_flat = b.index(None, list(zip(tap, row_strides(kernel), strict=True)))
    image = b.loop(n_images)
    x_plane = b.index(x_replica, [(image, channels * math.prod(spatial)),
                                  (channel, math.prod(spatial))])
    row = b.index(cols_replica, [(channel, taps * n_images * pixels),
                                 (tap_flat, n_images * pixels), (image, pixels)])
    out_strides, in_strides = row_strides(outputs), row_strides(spatial)
    valid = None
    for j in range(d - 1):  # the outer output dims: a row of taps inside x, or zeros
        o = b.loop(outputs[j])
        at = b.plus(b.index(None, [(o, strides[j]), (tap[j], dilations[j])]), -low[j])
        inside = b.emit(f"arith.andi {compare('sge', at, b.const(0))}, "
                        f"{compare('slt', at, b.const(spatial[j]))} : i1")
        valid = inside if valid is None else b.emit(f"arith.andi {valid}, {inside} : i1")
        x_plane = b.index(x_plane, [(at, in_strides[j])])
        row = b.index(row, [(o, out_strides[j])])
    # along the last dim, pixel o reads x at o * s - a (a = low - tap * dilation): inside
    # x for lo <= o < hi
    s, width, last = strides[-1], outputs[-1], spatial[-1]
    a = b.index(b.const(low[-1]), [(tap[-1], -dilations[-1])])
    if s == 1:
        lo = a
        hi = b.emit(f"arith.addi {a}, {b.const(last)} : i64")
    else:
        up = b.emit(f"arith.addi {a}, {b.const(s - 1)} : i64")
        lo = b.emit(f"arith.divsi {up}, {b.const(s)} : i64")
        end = b.emit(f"arith.addi {a}, {b.const(last - 1)} : i64")
        hi = pick(compare("sge", end, b.const(0)),
                  b.emit(f"arith.addi {b.emit(f'arith.divsi {end}, {b.const(s)} : i64')}, "
                         f"{b.const(1)} : i64"), b.const(0))
    lo = pick(compare("sgt", lo, b.const(0)), lo, b.const(0))  # (a <= 0: from 0)
    lo = pick(compare("slt", lo, b.const(width)), lo, b.const(width))
    hi = pick(compare("slt", hi, b.const(width)), hi, b.const(width))
    hi = pick(compare("sgt", hi, lo), hi, lo)
    if valid is not None:  # a row outside x: all zeros
        lo, hi = pick(valid, lo, b.const(width)), pick(valid, hi, b.const(width))
    fill(b.const(0), lo, row)
    o = b.loop_from(lo, hi)
    read = b.emit(f"arith.subi {b.index(x_plane, [(o, s)])}, {a} : i64")
    b.store(b.load("%in0", read, "f32"), "%out0", b.emit(f"arith.addi {row}, {o} : i64"),
            "f32")
    b.close()
    fill(hi, b.const(width), row)
    for _ in range(d - 1 + 1 + len(kernel) + 2):
        b.close()
    return b.text(header(name, 1, 1))


class F32Call:
    """A convolution-family op computed with a compiled kernel (`kernel`; `compute` says
    how, e.g. with BLAS products around it) on the two f32 operands it was compiled for:
    the first with any leading (replica) axes, the second with none or the same. Other
    operands go to the op's NumPy kernel."""

    def __init__(self, kernel, op: ir.Operation) -> None:
        self.kernel = kernel
        k = kernel_of(op)
        self.fallback, self.static = k.fn, k.static(op.opview)
        self.source = tuple(op.operands[0].type.shape)
        self.other = tuple(op.operands[1].type.shape)

    def __call__(self, x: np.ndarray, other: np.ndarray) -> tuple[np.ndarray]:
        lead = x.shape[:x.ndim - len(self.source)]
        lead_other = other.shape[:other.ndim - len(self.other)]
        if x.dtype != np.float32 or other.dtype != np.float32 or \
                x.shape[len(lead):] != self.source or \
                other.shape[len(lead_other):] != self.other or lead_other not in ((), lead):
            return (self.fallback(x, other, **self.static),)
        return (self.compute(x, other, lead, lead_other),)

    def compute(self, x: np.ndarray, other: np.ndarray, lead: tuple[int, ...],
                lead_other: tuple[int, ...]) -> np.ndarray:
        raise NotImplementedError


class Convolution(F32Call):
    """`ipu.conv(x, w)` or `ipu.conv_weight_grad(x, dy)` on the windows of x that the
    compiled kernel gathers: one BLAS product per replica and group, as the NumPy kernel
    makes them on its own windows (`kernels.convolution.im2col`)."""

    def __init__(self, windows, op: ir.Operation) -> None:
        super().__init__(windows, op)
        self.weight_grad = op_class(op) is ConvWeightGradOp
        _, _, self.outputs, *_, self.groups = _geometry(op)
        self.result = tuple(op.results[0].type.shape)

    def compute(self, x: np.ndarray, other: np.ndarray, lead: tuple[int, ...],
                lead_other: tuple[int, ...]) -> np.ndarray:
        cols, = self.kernel(x)
        g = self.groups
        replicas = math.prod(lead)
        cols = cols.reshape(replicas, g, -1, cols.shape[-1])
        if self.weight_grad:  # dw[g] = dy[g] (C_out / g, N x pixels) @ cols[g]^T
            n, c_out = other.shape[len(lead_other):len(lead_other) + 2]
            dy = np.moveaxis(other.reshape(lead_other + (n, g, c_out // g, -1)), -4, -2)
            dy = dy.reshape(-1, g, c_out // g, n * math.prod(self.outputs))
            w = np.matmul(dy, np.swapaxes(cols, -1, -2))
            return w.reshape(lead + self.result)
        c_out, n = self.result[1], self.result[0]
        w = other.reshape(-1, g, c_out // g, cols.shape[2])
        y = np.matmul(w, cols).reshape(lead + (c_out, n) + self.outputs)
        return np.moveaxis(y, len(lead), len(lead) + 1)


# ---- transposed convolutions: the taps' products added into place (col2im) ---------------
def _transposed(op: ir.Operation) -> tuple:
    """(input shape, kernel, output shape, strides, padding, dilations, groups) of an
    `ipu.conv_transpose`."""
    strides, padding, dilations = ([int(x) for x in op.attributes[name]]
                                   for name in ("strides", "padding", "dilations"))
    return (tuple(op.operands[0].type.shape), tuple(op.operands[1].type.shape[2:]),
            tuple(op.results[0].type.shape), strides, padding, dilations,
            int(op.attributes["groups"].value))


def transposed_group(op: ir.Operation) -> Group | None:
    types = [storage(v.type) for v in list(op.operands) + list(op.results)]
    if types != ["f32"] * 3 or op.operands[0].type.rank < 3 or \
            math.prod(op.results[0].type.shape) < FUSE_MIN_ELEMENTS:
        return None
    _, kernel, result, strides, padding, _, groups = _transposed(op)
    if _per_image(op, kernel, result[2:], strides, padding,
                  [int(x) for x in op.attributes["output_padding"]], groups):
        return None
    return Group(tuple(op.results[0].type.shape), [op], inputs=list(op.operands),
                 outputs=list(op.results), kind=Kind.WINDOW)


def col2im_io(op: ir.Operation) -> tuple[list, list]:
    """The col2im function's input (the taps' products) and output, as `FusedKernel`
    takes them."""
    source, kernel, result, *_ = _transposed(op)
    products = result[1] * math.prod(kernel) * source[0] * math.prod(source[2:])
    return ([(products, 2, np.dtype(np.float32))], [(result, np.dtype(np.float32))])


def col2im_split(op: ir.Operation) -> tuple[int, int]:
    """The col2im function's outer parallel loop (`FusedKernel`'s split): the images."""
    return op.operands[0].type.shape[0], 0


def col2im(name: str, op: ir.Operation) -> str:
    """y[n, c, o] = the sum over taps t of cols[c, t, n, i] where o + padding = i * stride
    + t * dilation, for the products cols (C_out x taps, N x input pixels) of one
    replica: loops over images, channels and the output's rows; a row is zeroed, then
    each tap whose input row it meets adds its products along the row (contiguous for
    stride 1), taps in order as the NumPy kernel adds them."""
    source, kernel, result, strides, padding, dilations, _ = _transposed(op)
    n_images, spatial = source[0], source[2:]
    channels, outputs = result[1], result[2:]
    d = len(spatial)
    taps, pixels, area = math.prod(kernel), math.prod(spatial), math.prod(outputs)
    b = Lines()
    zero = b.const("0.0 : f32")
    pick, compare = b.pick, b.compare

    replica = b.loop("%replicas")
    cols_replica = b.emit(f"arith.muli {replica}, %step0 : i64")
    y_replica = b.index(None, [(replica, n_images * channels * area)])
    image = b.split(replica, n_images)
    channel = b.loop(channels)
    out = [b.loop(outputs[j]) for j in range(d - 1)]
    row = b.index(y_replica, [(image, channels * area), (channel, area)]
                  + list(zip(out, row_strides(outputs)[:-1], strict=True)))
    width = outputs[-1]
    o = b.loop(width)
    b.store(zero, "%out0", b.emit(f"arith.addi {row}, {o} : i64"), "f32")
    b.close()
    tap = [b.loop(k) for k in kernel]
    tap_flat = b.index(None, list(zip(tap, row_strides(kernel), strict=True)))
    cols_row = b.index(cols_replica, [(channel, taps * n_images * pixels),
                                      (tap_flat, n_images * pixels), (image, pixels)])
    in_strides = row_strides(spatial)
    valid = None
    for j in range(d - 1):  # the input row tap j meets: i = (o + p - t d) / s, if whole
        at = b.index(b.const(padding[j]), [(out[j], 1), (tap[j], -dilations[j])])
        ok = compare("sge", at, b.const(0))
        if strides[j] > 1:
            rest = b.emit(f"arith.remsi {at}, {b.const(strides[j])} : i64")
            ok = b.emit(f"arith.andi {ok}, {compare('eq', rest, b.const(0))} : i1")
            at = b.emit(f"arith.divsi {at}, {b.const(strides[j])} : i64")
        ok = b.emit(f"arith.andi {ok}, {compare('slt', at, b.const(spatial[j]))} : i1")
        valid = ok if valid is None else b.emit(f"arith.andi {valid}, {ok} : i1")
        at = pick(ok, at, b.const(0))  # (read nothing when outside)
        cols_row = b.index(cols_row, [(at, in_strides[j])])
    # along the row: input pixel i adds at o = i * s - a (a = p - t * dilation), inside
    # the output for lo <= i < hi
    s, last = strides[-1], spatial[-1]
    a = b.index(b.const(padding[-1]), [(tap[-1], -dilations[-1])])
    up = b.emit(f"arith.addi {a}, {b.const(s - 1)} : i64")
    lo = b.emit(f"arith.divsi {up}, {b.const(s)} : i64") if s > 1 else a
    lo = pick(compare("sgt", a, b.const(0)), lo, b.const(0))
    end = b.emit(f"arith.addi {a}, {b.const(width - 1)} : i64")  # the last o's i * s
    hi = b.emit(f"arith.addi {b.emit(f'arith.divsi {end}, {b.const(s)} : i64')}, "
                f"{b.const(1)} : i64") if s > 1 else \
        b.emit(f"arith.addi {end}, {b.const(1)} : i64")
    hi = pick(compare("sge", end, b.const(0)), hi, b.const(0))
    hi = pick(compare("slt", hi, b.const(last)), hi, b.const(last))
    lo = pick(compare("slt", lo, hi), lo, hi)
    if valid is not None:
        lo = pick(valid, lo, hi)
    i = b.loop_from(lo, hi)
    shifted = b.emit(f"arith.subi {b.index(None, [(i, s)])}, {a} : i64")
    target = b.emit(f"arith.addi {row}, {shifted} : i64")
    old = b.load("%out0", target, "f32")
    value = b.load("%in0", b.emit(f"arith.addi {cols_row}, {i} : i64"), "f32")
    b.store(b.emit(f"arith.addf {old}, {value} : f32"), "%out0", target, "f32")
    b.close()
    for _ in range(len(kernel) + d - 1 + 3):
        b.close()
    return b.text(header(name, 1, 1))


class TransposedConvolution(F32Call):
    """`ipu.conv_transpose(x, w)`: one BLAS product per replica and group gives every
    tap's contribution (as the NumPy kernel computes them), which the compiled kernel
    adds into the output in its final layout (`col2im`)."""

    def __init__(self, add, op: ir.Operation) -> None:
        super().__init__(add, op)
        _, self.kernel_size, _, _, _, _, self.groups = _transposed(op)

    def compute(self, x: np.ndarray, w: np.ndarray, lead: tuple[int, ...],
                lead_other: tuple[int, ...]) -> np.ndarray:
        g = self.groups
        n, c_in = self.source[:2]
        xt = np.moveaxis(x.reshape((-1, n, g, c_in // g, math.prod(self.source[2:]))), 1, 3)
        xt = np.ascontiguousarray(xt).reshape(-1, g, c_in // g, n * xt.shape[-1])
        wt = np.swapaxes(w.reshape(-1, g, c_in // g,
                                   self.other[1] * math.prod(self.kernel_size)), -1, -2)
        cols = np.matmul(wt, xt)  # (replicas, g, c_out / g x taps, n x pixels)
        result, = self.kernel(cols.reshape(lead + (-1, cols.shape[-1])))
        return result
