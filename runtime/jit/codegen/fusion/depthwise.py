"""Grouped convolutions with few channels per group (depthwise ones above all) as direct
compiled kernels: every tap's multiply-add, with no window matrix and no BLAS product.

im2col and a product per group suit a convolution whose groups are wide; a depthwise
one (one input channel per group) makes C products of (1 x taps) @ (taps x N * pixels)
on a window matrix `taps` times the input's size (efficientnet_b0 at batch 32 on 64 x 64
images, one thread: 424 of its 700 ms). Here a group's input planes of a stack of images are copied
into a zeroed scratch with the padding around them (`Direct.padded`, cropped to what the
taps that read the input reach), so that every tap of every output pixel reads the
scratch at a fixed offset from the pixel's own: with the output laid out at the
scratch's row strides (a "full" plane, a few columns of each row unused), the stack is
one flat loop `full[j] = sum over taps of w[t] * scratch[stride * j + offset(t)]` that
LLVM vectorises, then copied to the output. Images follow one another in the scratch,
or for small planes, whose padding would be most of the work, interleave element by
element (`Direct.interleaved`). Measured against torch's own depthwise kernels on one
thread, 32 images: 0.6-1.3x its time (4 x 4 planes with 5 x 5 kernels: 1.3x).

The three ops of a depthwise layer's forward and training take this one form:
- `ipu.conv`: as above;
- `ipu.conv_transpose` (the input gradient): the input is stuffed into the scratch at
  its stride (zeros between), padded by `(K - 1) * dilation - padding` and read by the
  flipped kernel at stride 1;
- `ipu.conv_weight_grad`: the output's gradient is laid out as a full plane (zeros in
  the unused columns), and each tap's weight gradient is the dot product of it with the
  scratch at the tap's offset, summed over the images.

The cost of one output pixel is channels per group x taps multiply-adds, against the
product's share of a BLAS product: direct kernels serve groups of at most
MAX_CHANNELS input channels (and convolutions with more than one group). Strides must
be equal in every dim (the flat loop has one), padding of a transposed one at most
`(K - 1) * dilation`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from torch_mlir import ir

from poptorch.dialects import op_class
from poptorch.dialects.convolution import ConvTransposeOp
from poptorch.dialects.convolution_backward import ConvWeightGradOp
from poptorch.runtime.jit.codegen.fusion.convolution import F32Call
from poptorch.runtime.jit.codegen.fusion.group import (
    FUSE_MIN_ELEMENTS,
    Group,
    Kind,
    row_strides,
    storage,
)
from poptorch.runtime.jit.codegen.fusion.lines import Lines, header

MAX_CHANNELS = 8  # input channels per group a direct kernel takes
STACK_ELEMENTS = 1 << 15  # elements of the scratch volume (128 KiB, within L2)
# independent sums of a pixel's taps (`forward`): the multiply-adds of one element do not
# wait each for the last (4 x 4 planes, 5 x 5 kernels: 14% faster than one sum)
CHAINS = 4
# what copying an element in or out costs with interleaved images, in multiply-adds of
# the sweep (`Direct.interleaved`)
INTERLEAVING = 3
_FAST = "fastmath<contract>"  # a multiply and an add may fuse (FMA)
_REDUCE = "fastmath<reassoc, contract>"  # a dot product may be reordered (vectorised)


@dataclass(frozen=True)
class Direct:
    """The geometry of a direct kernel (see the module's docstring): `source` (N, C, *S)
    is the input (the forward's, also of the weight gradient), `result` the op's result,
    `other` its second operand; each of the `groups` reads `per_group` input channels and
    writes `outputs_per_group` output channels."""

    source: tuple[int, ...]
    other: tuple[int, ...]
    result: tuple[int, ...]
    groups: int
    per_group: int
    outputs_per_group: int
    spread: tuple[int, ...]  # spacing of the input's elements in the scratch
    low: tuple[int, ...]  # the scratch's padding before and after the input
    high: tuple[int, ...]
    stride: int
    outputs: tuple[int, ...]  # the output plane
    transposed: bool  # the weight is (C_in, C_out / groups, *K), read flipped
    taps: tuple[tuple[int, int], ...]  # (the weight's tap, its offset in the scratch plane)

    @property
    def padded(self) -> tuple[int, ...]:
        """The scratch plane's shape."""
        return tuple((s - 1) * e + 1 + lo + hi for s, e, lo, hi in zip(
            self.source[2:], self.spread, self.low, self.high, strict=True))

    @property
    def length(self) -> int:
        """The pixels of a full plane: the output's at the scratch's row strides."""
        return sum((o - 1) * r for o, r in zip(self.outputs, row_strides(self.padded),
                                               strict=True)) + 1

    @property
    def pitch(self) -> int:
        """Images apart in the full planes, one after the other (`interleaved` False)."""
        return -(-math.prod(self.padded) // self.stride)

    @property
    def stack(self) -> int:
        """Images whose planes the scratch holds at once: the most that divide the batch
        with at most STACK_ELEMENTS elements of scratch (at least one)."""
        n = self.source[0]
        most = max(1, STACK_ELEMENTS // (self.per_group * self.pitch * self.stride))
        return max(k for k in range(1, min(n, most) + 1) if n % k == 0)

    @property
    def interleaved(self) -> bool:
        """Whether the stack's images interleave, element by element, in the scratch and
        the full planes: for small planes, whose padding and unused columns would
        otherwise be most of the work, when what the sweep saves (a full plane of
        `length` pixels an image instead of `pitch`) is more than the interleaving costs
        (INTERLEAVING multiply-adds per element copied in and out; measured on 32 images:
        an 8 x 8 plane with a 3 x 3 kernel is faster one image after the other, 4 x 4
        ones with 5 x 5 kernels 2.3x faster interleaved)."""
        saved = len(self.taps) * (self.pitch - self.length)
        copied = math.prod(self.source[2:]) + math.prod(self.outputs)
        return self.stack > 1 and saved > INTERLEAVING * copied

    @property
    def strides(self) -> tuple[int, int, int, int]:
        """Element strides of (an image, a pixel) in the scratch, then in the full planes."""
        if self.interleaved:
            return 1, self.stack, 1, self.stack
        return self.pitch * self.stride, 1, self.pitch, 1

    @property
    def scratch(self) -> int:
        """The scratch's elements for one input channel."""
        if self.interleaved:
            return self.stack * math.prod(self.padded)
        return self.stack * self.pitch * self.stride

    @property
    def full(self) -> int:
        """The full planes' elements."""
        if self.interleaved:
            return self.stack * self.length
        return (self.stack - 1) * self.pitch + self.length


def _taps(size: int, spread: int, low: int, high: int, kernel: int, dilation: int,
          stride: int, outputs: int) -> tuple[list[int], int, int]:
    """Along one dim: the taps that read an input element for some output, and the
    scratch's padding once the padding only the other taps read is cropped (the
    uncropped padding when cropping would cut into the input)."""
    used = [t for t in range(kernel) if any(
        0 <= o * stride + t * dilation - low <= (size - 1) * spread
        and (o * stride + t * dilation - low) % spread == 0 for o in range(outputs))]
    if not used:
        return [], low, high
    new_low = low - used[0] * dilation
    new_high = (outputs - 1) * stride + (used[-1] - used[0]) * dilation + 1 \
        - (size - 1) * spread - 1 - new_low
    if new_low < 0 or new_high < 0:
        return used, low, high
    return used, new_low, new_high


def _uniform(strides: list[int]) -> int | None:
    return strides[0] if len(set(strides)) == 1 else None


def geometry(op: ir.Operation) -> Direct | None:
    """The direct kernel's geometry for `op`, or None when it has none (see the module)."""
    cls = op_class(op)
    attrs = op.attributes
    strides, dilations = ([int(x) for x in attrs[n]] for n in ("strides", "dilations"))
    groups = int(attrs["groups"].value)
    source, other = tuple(op.operands[0].type.shape), tuple(op.operands[1].type.shape)
    result = tuple(op.results[0].type.shape)
    d = len(source) - 2
    transposed = cls is ConvTransposeOp
    if transposed:
        kernel = other[2:]
        padding, extra = ([int(x) for x in attrs[n]] for n in ("padding", "output_padding"))
        low = [(k - 1) * di - p for k, di, p in zip(kernel, dilations, padding, strict=True)]
        high = [lo + e for lo, e in zip(low, extra, strict=True)]
        if min(low) < 0:
            return None
        spread, stride, outputs, c_out = strides, 1, result[2:], result[1]
    else:
        stride = _uniform(strides)
        if stride is None:
            return None
        weight = result if cls is ConvWeightGradOp else other
        kernel, c_out = weight[2:], weight[0]
        low, high = ([int(x) for x in attrs[n]] for n in ("padding_low", "padding_high"))
        spread, outputs = [1] * d, (other if cls is ConvWeightGradOp else result)[2:]
    used = []
    for j in range(d):
        used_j, low[j], high[j] = _taps(source[2 + j], spread[j], low[j], high[j], kernel[j],
                                        dilations[j], stride, outputs[j])
        used.append(used_j)
    padded = [(s - 1) * e + 1 + lo + hi for s, e, lo, hi in zip(source[2:], spread, low, high,
                                                                  strict=True)]
    if any((p - di * (max(u, default=0) - min(u, default=0)) - 1) // stride + 1 < o
           for p, di, u, o in zip(padded, dilations, used, outputs, strict=True)):
        return None  # (the op's verifier makes this impossible)
    taps = []
    for tap in itertools.product(*used):  # row-major; a transposed weight reads flipped
        flat = sum(t * r for t, r in zip(tap, row_strides(kernel), strict=True))
        offset = sum((t - u[0]) * di * r for t, u, di, r in zip(
            tap, used, dilations, row_strides(padded), strict=True))
        taps.append((math.prod(kernel) - 1 - flat if transposed else flat, offset))
    if not taps:
        return None  # (every output is zero: the NumPy kernel's)
    return Direct(source, other, result, groups,
                  source[1] // groups, c_out // groups, tuple(spread), tuple(low), tuple(high),
                  stride, tuple(outputs), transposed, tuple(taps))


def direct_group(op: ir.Operation) -> Group | None:
    """The one-op group of a grouped convolution, transposed convolution or weight
    gradient of f32 that a direct kernel computes, or None."""
    types = [storage(v.type) for v in list(op.operands) + list(op.results)]
    if types != ["f32"] * 3 or op.operands[0].type.rank < 3 or \
            int(op.attributes["groups"].value) == 1:
        return None
    direct = geometry(op)
    if direct is None or direct.per_group > MAX_CHANNELS or \
            direct.source[0] * direct.source[1] * math.prod(direct.outputs) < FUSE_MIN_ELEMENTS:
        return None
    return Group(tuple(op.results[0].type.shape), [op], inputs=list(op.operands),
                 outputs=list(op.results), kind=Kind.WINDOW)


def direct_io(op: ir.Operation) -> tuple[list, list]:
    """The function's inputs (the op's two operands) and outputs (its result, the scratch
    volume of a group's input planes and a full plane)."""
    direct = geometry(op)
    f32 = np.dtype(np.float32)
    inputs = [(math.prod(v.type.shape), v.type.rank, f32) for v in op.operands]
    return inputs, [(direct.result, f32), ((direct.per_group * direct.scratch,), f32),
                    ((direct.full,), f32)]


def _zero(b: Lines, pointer: str, size: int, base: str | None = None) -> None:
    """Store zeros over `size` elements of `pointer` from `base`."""
    i = b.loop(size)
    b.store(b.const("0.0 : f32"), pointer, i if base is None else
            b.emit(f"arith.addi {base}, {i} : i64"), "f32")
    b.close()


def _copy_planes(b: Lines, direct: Direct, x_base: str) -> None:
    """Copy the stack's input planes (images from `x_base` in %in0, the group's channels)
    into the scratch (%out1) at their places: the padding's offset, elements `spread`
    apart (interleaved images: the images innermost, so that the stores are contiguous)."""
    spatial, padded = direct.source[2:], direct.padded
    area, channels = math.prod(spatial), direct.source[1]
    strides, in_strides = row_strides(padded), row_strides(spatial)
    image_stride, pixel_stride, _, _ = direct.strides
    start = sum(lo * r for lo, r in zip(direct.low, strides, strict=True))
    channel = b.loop(direct.per_group)
    source = b.index(x_base, [(channel, area)])
    target = b.index(b.const(start * pixel_stride), [(channel, direct.scratch)])
    inner = direct.interleaved
    if not inner:
        image = b.loop(direct.stack)
        source = b.index(source, [(image, channels * area)])
        target = b.index(target, [(image, image_stride)])
    for j in range(len(spatial)):
        i = b.loop(spatial[j])
        source = b.index(source, [(i, in_strides[j])])
        target = b.index(target, [(i, direct.spread[j] * strides[j] * pixel_stride)])
    if inner:
        image = b.loop(direct.stack)
        source = b.index(source, [(image, channels * area)])
        target = b.index(target, [(image, image_stride)])
    b.store(b.load("%in0", source, "f32"), "%out1", target, "f32")
    for _ in range(len(spatial) + 2):
        b.close()


def _pixels(b: Lines, direct: Direct) -> tuple[str, str, str]:
    """Open loops over the stack's images and their output pixels: returns (the image,
    the pixel's index in its output plane, its index in the full planes)."""
    _, _, image_stride, pixel_stride = direct.strides
    image = b.loop(direct.stack)
    plane, full = None, b.index(None, [(image, image_stride)])
    for o, r, f in zip(direct.outputs, row_strides(direct.outputs), row_strides(direct.padded),
                       strict=True):
        i = b.loop(o)
        plane, full = b.index(plane, [(i, r)]), b.index(full, [(i, f * pixel_stride)])
    return image, plane, full


def _stacks(b: Lines, direct: Direct, replica: str, x_replica: str,
            prepare: Callable[[str], None] | None = None) -> tuple[str, str]:
    """Open the loops over groups (the outer parallel loop, `FusedKernel`'s split) and
    stacks of images, and copy each stack's input planes into the scratch: returns (the
    group, the stack's first image). `prepare(group)` writes what comes first in a
    group."""
    n_images, channels = direct.source[:2]
    area = math.prod(direct.source[2:])
    group = b.split(replica, direct.groups)
    if prepare is not None:
        prepare(group)
    first = b.index(None, [(b.loop(n_images // direct.stack), direct.stack)])
    _copy_planes(b, direct, b.index(x_replica, [(first, channels * area),
                                                (group, direct.per_group * area)]))
    return group, first


def _sweep(b: Lines, direct: Direct, scratch: str, carries: bool = False
           ) -> tuple[list[tuple[str, str]], str, str]:
    """Open the loops over the full planes: one flat loop, or pixels then images when
    interleaved images are read at a stride. `carries`: each loop carries one f32 sum
    (its result, and the value in the body). Returns each loop's (result, carried value),
    outer first, the element's index in the full planes and where its tap at offset 0
    reads the scratch (a tap at offset f: `direct.strides[1]` * f later)."""
    stack, stride = direct.stack, direct.stride
    nested = direct.interleaved and stride > 1
    sizes = [direct.length, stack] if nested else [direct.full]
    loops, counters = [], []
    init = b.const("0.0 : f32")
    for size in sizes:
        b.count += 1
        i, result, value = f"%j{b.count}", f"%r{b.count}", f"%c{b.count}"
        head = f"scf.for {i} = {b.const(0)} to {b.const(size)} step {b.const(1)}"
        if carries:
            b.add(f"{result} = {head} iter_args({value} = {init}) -> (f32) : i64 {{")
        else:
            b.add(f"{head} : i64 {{")
        b.indent += "  "
        loops.append((result, value))
        counters.append(i)
    if not nested:
        scale = 1 if direct.interleaved else stride
        return loops, counters[0], b.index(scratch, [(counters[0], scale)])
    j, image = counters
    return loops, b.index(image, [(j, stack)]), b.index(scratch, [(j, stride * stack),
                                                                   (image, 1)])


def forward(name: str, op: ir.Operation) -> str:
    """The kernel of a convolution or transposed convolution (see the module)."""
    direct = geometry(op)
    c_out, pixel_stride = direct.result[1], direct.strides[1]
    area_out = math.prod(direct.outputs)
    kernel_taps = math.prod(direct.other[2:])
    b = Lines()
    _zero(b, "%out1", direct.per_group * direct.scratch)
    replica = b.loop("%replicas")
    x_replica = b.emit(f"arith.muli {replica}, %step0 : i64")
    w_replica = b.emit(f"arith.muli {replica}, %step1 : i64")
    y_replica = b.index(None, [(replica, direct.source[0] * c_out * area_out)])
    group, first = _stacks(b, direct, replica, x_replica)
    m = b.loop(direct.outputs_per_group)
    co = b.index(m, [(group, direct.outputs_per_group)])
    for initial in (True, False):
        if initial:
            channel = b.const(0)
        elif direct.per_group == 1:
            break
        else:
            channel = b.loop_from(b.const(1), b.const(direct.per_group))
        if direct.transposed:  # w[g * cpg + ci, m, tap]
            w_base = b.index(w_replica, [(group, direct.per_group * direct.outputs_per_group
                                          * kernel_taps),
                                         (channel, direct.outputs_per_group * kernel_taps),
                                         (m, kernel_taps)])
        else:  # w[co, ci, tap]
            w_base = b.index(w_replica, [(co, direct.per_group * kernel_taps),
                                         (channel, kernel_taps)])
        weights = [b.load("%in1", b.plus(w_base, t), "f32") for t, _ in direct.taps]
        loops, j, at = _sweep(b, direct, b.index(None, [(channel, direct.scratch)]))
        # CHAINS sums of every CHAINS-th tap, so that the multiply-adds of one element
        # do not wait each for the last
        sums: list[str | None] = [None if initial else b.load("%out2", j, "f32")]
        sums += [None] * (min(CHAINS, len(weights)) - 1)
        for k, (w, (_, offset)) in enumerate(zip(weights, direct.taps, strict=True)):
            value = b.load("%out1", b.plus(at, offset * pixel_stride), "f32")
            product = b.emit(f"arith.mulf {w}, {value} {_FAST} : f32")
            chain = k % len(sums)
            sums[chain] = product if sums[chain] is None else \
                b.emit(f"arith.addf {sums[chain]}, {product} {_FAST} : f32")
        while len(sums) > 1:  # pairwise
            pairs = zip(sums[0:-1:2], sums[1::2], strict=True)
            sums = [b.emit(f"arith.addf {x}, {y} : f32") for x, y in pairs] \
                + sums[len(sums) // 2 * 2:]
        b.store(sums[0], "%out2", j, "f32")
        for _ in loops:
            b.close()
        if not initial:
            b.close()
    image, pixel, at = _pixels(b, direct)
    target = b.index(y_replica, [(first, c_out * area_out), (image, c_out * area_out),
                                 (co, area_out), (pixel, 1)])
    b.store(b.load("%out2", at, "f32"), "%out0", target, "f32")
    for _ in range(len(direct.outputs) + 5):
        b.close()
    return b.text(header(name, 2, 3))


def weight_grad(name: str, op: ir.Operation) -> str:
    """The kernel of a convolution's weight gradient (see the module): per replica, group,
    stack of images and output channel, the gradient's full planes, and per input channel
    and tap their dot product with the scratch, added into the result."""
    direct = geometry(op)
    c_out, pixel_stride = direct.result[0], direct.strides[1]
    area_out = math.prod(direct.outputs)
    kernel_taps = math.prod(direct.result[2:])
    size = c_out * direct.per_group * kernel_taps
    b = Lines()
    _zero(b, "%out1", direct.per_group * direct.scratch)
    _zero(b, "%out2", direct.full)
    replica = b.loop("%replicas")
    x_replica = b.emit(f"arith.muli {replica}, %step0 : i64")
    g_replica = b.emit(f"arith.muli {replica}, %step1 : i64")
    w_replica = b.index(None, [(replica, size)])
    block = size // direct.groups  # a group's weights: (C_out / groups, per_group, taps)
    group, first = _stacks(b, direct, replica, x_replica, lambda group: _zero(
        b, "%out0", block, b.index(w_replica, [(group, block)])))
    m = b.loop(direct.outputs_per_group)
    co = b.index(m, [(group, direct.outputs_per_group)])
    image, pixel, at = _pixels(b, direct)
    source = b.index(g_replica, [(first, c_out * area_out), (image, c_out * area_out),
                                 (co, area_out), (pixel, 1)])
    b.store(b.load("%in1", source, "f32"), "%out2", at, "f32")
    for _ in range(len(direct.outputs) + 1):
        b.close()
    channel = b.loop(direct.per_group)
    scratch = b.index(None, [(channel, direct.scratch)])
    w_base = b.index(w_replica, [(co, direct.per_group * kernel_taps), (channel, kernel_taps)])
    for t, offset in direct.taps:  # one dot product a tap
        loops, j, at = _sweep(b, direct, scratch, carries=True)
        value = b.load("%out1", b.plus(at, offset * pixel_stride), "f32")
        product = b.emit(f"arith.mulf {b.load('%out2', j, 'f32')}, {value} {_REDUCE} : f32")
        added = product
        for result, carried in reversed(loops):  # each loop adds its body's (inner) sum
            added = b.emit(f"arith.addf {carried}, {added} {_REDUCE} : f32")
            b.add(f"scf.yield {added} : f32")
            b.close()
            added = result
        target = b.plus(w_base, t)
        b.store(b.emit(f"arith.addf {b.load('%out0', target, 'f32')}, {added} : f32"), "%out0",
                target, "f32")
    for _ in range(5):
        b.close()
    return b.text(header(name, 2, 3))


def split(op: ir.Operation) -> tuple[int, int]:
    """The outer parallel loop (`FusedKernel`'s split): the groups; the scratch volume
    and the full planes are each chunk's own."""
    return geometry(op).groups, 2


def function(name: str, op: ir.Operation) -> str:
    """The direct kernel of `op` as a func.func."""
    return (weight_grad if op_class(op) is ConvWeightGradOp else forward)(name, op)


class DirectConvolution(F32Call):
    """What the program calls for a direct kernel: the compiled function on the two f32
    operands it was compiled for, the op's NumPy kernel on others (`F32Call`); the
    scratch outputs are dropped."""

    def compute(self, x: np.ndarray, other: np.ndarray, lead: tuple[int, ...],
                lead_other: tuple[int, ...]) -> np.ndarray:
        return self.kernel(x, other)[0]
