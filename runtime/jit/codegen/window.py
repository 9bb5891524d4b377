"""Compiled window kernels: max pooling, with and without indices, and its gradient, and
the windows a convolution multiplies (im2col), as functions of the JIT's kernel module
(`fusion.kernel_module`), called like its fused groups (`fusion.FusedKernel`: pointer
arguments, the number of replicas and each input's replica stride).

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

NumPy pools a window one tap at a time: a pass over the output per tap for the maximum,
four more per tap for the first index of it, and a pass over the input for NaN. A
kernel here makes one pass: per output element it reads the window's taps (unrolled),
keeps the maximum and where it is, and stores both. The gradient zeroes the input's
plane and adds each output gradient at its index. The bench CNN's two 2x2 pools and
their gradients at micro-batch 32 (32x16x32x32 and 32x32x16x16 inputs) took 2.8 ms of
a training step as NumPy kernels and 0.9 ms as these (per-kernel timers).

The semantics are PyTorch's (and the NumPy kernels'): a window starts at its first
element inside the input, then takes every later tap that is greater, or NaN (so the
index of a NaN maximum is its last NaN); padding never wins. The index is the flat
index into the pooled dims of the input. A gradient index outside the input's plane is
skipped rather than written out of bounds (the JIT only passes its forward's indices).

Pools of f32 with i64 indices, at most MAX_TAPS taps a window and an output of at least
`fusion.FUSE_MIN_ELEMENTS` elements, and convolutions of f32 whose windows have that
many elements, are compiled; the rest stay NumPy kernels.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from torch_mlir import ir

from poptorch.runtime.jit.codegen.fusion import FUSE_MIN_ELEMENTS, Group, row_strides, storage

KINDS = ("ipu.max_pool", "ipu.max_pool_with_indices", "ipu.max_pool_grad", "ipu.conv",
         "ipu.conv_weight_grad", "ipu.conv_transpose")
CONVOLUTIONS = ("ipu.conv", "ipu.conv_weight_grad")
MAX_TAPS = 64  # taps are unrolled in the kernel's body


def _window(op: ir.Operation) -> tuple[list[int], ...]:
    """kernel, strides, padding and dilations of a pooling op."""
    return tuple([int(x) for x in op.attributes[name]]
                 for name in ("kernel", "strides", "padding", "dilations"))


def window_group(op: ir.Operation) -> Group | None:
    """The one-op group of a pooling op or convolution the kernel module computes, or
    None."""
    if op.name in CONVOLUTIONS:
        return _convolution_group(op)
    if op.name == "ipu.conv_transpose":
        return _transposed_group(op)
    if op.name not in KINDS:
        return None
    kernel = _window(op)[0]
    types = [storage(v.type) for v in list(op.operands) + list(op.results)]
    wanted = {"ipu.max_pool": ["f32", "f32"], "ipu.max_pool_with_indices": ["f32", "f32", "i64"],
              "ipu.max_pool_grad": ["f32", "i64", "f32"]}[op.name]
    pooled = op.operands[0].type if op.name == "ipu.max_pool_grad" else op.results[0].type
    if types != wanted or math.prod(kernel) > MAX_TAPS \
            or math.prod(pooled.shape) < FUSE_MIN_ELEMENTS:
        return None
    return Group(tuple(op.results[0].type.shape), [op], inputs=list(op.operands),
                 outputs=list(op.results), kind="window")


class _Lines:
    """Lines of a kernel function's body; i64 constants go to its head, once each (so
    that every use, in any loop, is dominated by them)."""

    def __init__(self) -> None:
        self.head: list[str] = []
        self.lines: list[str] = []
        self.indent = "    "
        self.constants: dict[int | str, str] = {}
        self.count = 0

    def add(self, text: str) -> None:
        self.lines.append(self.indent + text)

    def emit(self, text: str) -> str:
        self.count += 1
        self.add(f"%v{self.count} = {text}")
        return f"%v{self.count}"

    def const(self, value: int | str) -> str:
        """An i64 constant, or a literal of another type ("0.0 : f32")."""
        if value not in self.constants:
            literal = f"{value} : i64" if isinstance(value, int) else value
            self.constants[value] = f"%k{len(self.constants)}"
            self.head.append(f"    {self.constants[value]} = arith.constant {literal}")
        return self.constants[value]

    def loop(self, upper: int | str) -> str:
        """Open `scf.for` from 0 to `upper`; returns its induction variable."""
        self.count += 1
        bound = upper if isinstance(upper, str) else self.const(upper)
        self.add(f"scf.for %i{self.count} = {self.const(0)} to {bound} step "
                 f"{self.const(1)} : i64 {{")
        self.indent += "  "
        return f"%i{self.count}"

    def loop_from(self, lower: str, upper: str) -> str:
        """Open `scf.for` from `lower` to `upper` (SSA values)."""
        self.count += 1
        self.add(f"scf.for %i{self.count} = {lower} to {upper} step {self.const(1)} : i64 {{")
        self.indent += "  "
        return f"%i{self.count}"

    def close(self) -> None:
        self.indent = self.indent[:-2]
        self.add("}")

    def pick(self, condition: str, a: str, b: str) -> str:
        """`a` where the i1 `condition` holds, else `b` (i64)."""
        return self.emit(f"arith.select {condition}, {a}, {b} : i64")

    def compare(self, predicate: str, a: str, b: str) -> str:
        return self.emit(f"arith.cmpi {predicate}, {a}, {b} : i64")

    def plus(self, value: str, amount: int) -> str:
        return self.emit(f"arith.addi {value}, {self.const(amount)} : i64") if amount \
            else value

    def index(self, base: str | None, terms: list[tuple[str, int]]) -> str:
        """base (None: 0) + the sum of value * stride over `terms`."""
        for value, stride in terms:
            if stride == 0:
                continue
            scaled = value if stride == 1 else self.emit(
                f"arith.muli {value}, {self.const(stride)} : i64")
            base = scaled if base is None else self.emit(f"arith.addi {base}, {scaled} : i64")
        return self.const(0) if base is None else base

    def load(self, pointer: str, index: str, element: str) -> str:
        address = self.emit(f"llvm.getelementptr {pointer}[{index}] : (!llvm.ptr, i64) "
                            f"-> !llvm.ptr, {element}")
        return self.emit(f"llvm.load {address} : !llvm.ptr -> {element}")

    def store(self, value: str, pointer: str, index: str, element: str) -> None:
        address = self.emit(f"llvm.getelementptr {pointer}[{index}] : (!llvm.ptr, i64) "
                            f"-> !llvm.ptr, {element}")
        self.add(f"llvm.store {value}, {address} : {element}, !llvm.ptr")

    def text(self, header: str) -> str:
        return "\n".join([header] + self.head + self.lines + ["    return", "  }"])


def _header(name: str, inputs: int, outputs: int) -> str:
    args = [f"%in{i}: !llvm.ptr {{llvm.noalias}}" for i in range(inputs)]
    args += [f"%out{i}: !llvm.ptr {{llvm.noalias}}" for i in range(outputs)]
    args += ["%replicas: i64"] + [f"%step{i}: i64" for i in range(inputs)]
    return f"  func.func @{name}({', '.join(args)}) {{"


def function(name: str, group: Group) -> str:
    """The kernel of a window group as a func.func (`fusion.FusedKernel`'s arguments)."""
    op = group.ops[0]
    if op.name in CONVOLUTIONS:
        return _im2col(name, op)
    if op.name == "ipu.conv_transpose":
        return _col2im(name, op)
    return (_gradient if op.name == "ipu.max_pool_grad" else _pool)(name, op)


def _pool(name: str, op: ir.Operation) -> str:
    kernel, strides, padding, dilations = _window(op)
    d = len(kernel)
    source = tuple(op.operands[0].type.shape)
    result = tuple(op.results[0].type.shape)
    spatial, outputs = source[-d:], result[-d:]
    planes = math.prod(result[:-d])
    indices = len(op.results) == 2
    b = _Lines()
    ninf = b.const("0xFF800000 : f32")
    true = b.const("true")
    replica = b.loop("%replicas")
    x_replica = b.emit(f"arith.muli {replica}, %step0 : i64")
    y_replica = b.index(None, [(replica, planes * math.prod(outputs))])
    plane = b.loop(planes)
    x_plane = b.index(x_replica, [(plane, math.prod(spatial))])
    y_base = b.index(y_replica, [(plane, math.prod(outputs))])
    out = [b.loop(o) for o in outputs]
    starts = [b.plus(b.index(None, [(o, s)]), -p)
              for o, s, p in zip(out, strides, padding, strict=True)]
    # a dim needs bounds checks when a window may start before it or run past its end
    checked = [p > 0 or (o - 1) * s + di * (k - 1) + 1 - p > n for o, s, p, di, k, n in zip(
        outputs, strides, padding, dilations, kernel, spatial, strict=True)]
    in_strides = row_strides(spatial)
    best = index = found = None  # found: None (no tap yet), "static" (one was) or a value
    for tap in itertools.product(*(range(k) for k in kernel)):
        at = [b.plus(start, t * di) for start, t, di in zip(starts, tap, dilations,
                                                             strict=True)]
        valid = None
        for j in range(d):
            if checked[j]:
                low = b.compare("sge", at[j], b.const(0))
                high = b.compare("slt", at[j], b.const(spatial[j]))
                both = b.emit(f"arith.andi {low}, {high} : i1")
                valid = both if valid is None else b.emit(f"arith.andi {valid}, {both} : i1")
        position = b.index(None, list(zip(at, in_strides, strict=True)))
        address = position if valid is None else b.pick(valid, position, b.const(0))
        value = b.load("%in0", b.emit(f"arith.addi {x_plane}, {address} : i64"), "f32")
        if valid is not None:  # padding never wins
            value = b.emit(f"arith.select {valid}, {value}, {ninf} : f32")
        if found is None and valid is None:  # the window's first element
            best, index, found = value, position, "static"
            continue
        if found is None:  # taken when inside
            take = valid
            found = valid
        else:
            greater = b.emit(f"arith.cmpf ogt, {value}, {best} : f32")
            nan = b.emit(f"arith.cmpf uno, {value}, {value} : f32")
            take = b.emit(f"arith.ori {greater}, {nan} : i1")
            if found != "static":  # or the first tap inside
                fresh = b.emit(f"arith.xori {found}, {true} : i1")
                first = b.emit(f"arith.andi {fresh}, {valid or true} : i1")
                take = b.emit(f"arith.ori {take}, {first} : i1")
                found = "static" if valid is None else b.emit(f"arith.ori {found}, {valid} : i1")
        best = b.emit(f"arith.select {take}, {value}, {best} : f32") if best else \
            b.emit(f"arith.select {take}, {value}, {ninf} : f32")
        index = b.emit(f"arith.select {take}, {position}, {index or b.const(0)} : i64")
    target = b.index(y_base, list(zip(out, row_strides(outputs), strict=True)))
    b.store(best, "%out0", target, "f32")
    if indices:
        b.store(index, "%out1", target, "i64")
    for _ in range(d + 2):
        b.close()
    return b.text(_header(name, 1, len(op.results)))


def _gradient(name: str, op: ir.Operation) -> str:
    grad = tuple(op.operands[0].type.shape)
    result = tuple(op.results[0].type.shape)
    d = len(_window(op)[0])
    planes = math.prod(result[:-d])
    area, pooled = math.prod(result[-d:]), math.prod(grad[-d:])
    b = _Lines()
    zero = b.const("0.0 : f32")
    replica = b.loop("%replicas")
    g_replica = b.emit(f"arith.muli {replica}, %step0 : i64")
    i_replica = b.emit(f"arith.muli {replica}, %step1 : i64")
    out_replica = b.index(None, [(replica, planes * area)])
    element = b.loop(planes * area)
    b.store(zero, "%out0", b.emit(f"arith.addi {out_replica}, {element} : i64"), "f32")
    b.close()
    plane = b.loop(planes)
    g_base = b.index(g_replica, [(plane, pooled)])
    i_base = b.index(i_replica, [(plane, pooled)])
    out_base = b.index(out_replica, [(plane, area)])
    e = b.loop(pooled)
    g = b.load("%in0", b.emit(f"arith.addi {g_base}, {e} : i64"), "f32")
    i = b.load("%in1", b.emit(f"arith.addi {i_base}, {e} : i64"), "i64")
    low = b.compare("sge", i, b.const(0))
    high = b.compare("slt", i, b.const(area))
    inside = b.emit(f"arith.andi {low}, {high} : i1")
    b.add(f"scf.if {inside} {{")
    b.indent += "  "
    target = b.emit(f"arith.addi {out_base}, {i} : i64")
    old = b.load("%out0", target, "f32")
    b.store(b.emit(f"arith.addf {old}, {g} : f32"), "%out0", target, "f32")
    b.close()
    for _ in range(3):
        b.close()
    return b.text(_header(name, 2, 1))


# ---- convolutions: the windows of the input (im2col) as a compiled kernel -----------------
def _geometry(op: ir.Operation) -> tuple:
    """(input shape, kernel, output spatial dims, strides, low padding, dilations, groups)
    of a convolution or its weight gradient."""
    source = tuple(op.operands[0].type.shape)
    if op.name == "ipu.conv":
        kernel = tuple(op.operands[1].type.shape[2:])
        outputs = tuple(op.results[0].type.shape[2:])
    else:  # the weight gradient: the kernel is its result's, the outputs its gradient's
        kernel = tuple(op.results[0].type.shape[2:])
        outputs = tuple(op.operands[1].type.shape[2:])
    strides, low, dilations = ([int(x) for x in op.attributes[name]]
                               for name in ("strides", "padding_low", "dilations"))
    return (source, kernel, outputs, strides, low, dilations,
            int(op.attributes["groups"].value))


def _convolution_group(op: ir.Operation) -> Group | None:
    """A convolution (or its weight gradient) of f32 whose windows the kernel module
    gathers (`_im2col`), or None."""
    types = [storage(v.type) for v in list(op.operands) + list(op.results)]
    if types != ["f32"] * 3 or op.operands[0].type.rank < 3:
        return None
    source, kernel, outputs, *_ = _geometry(op)
    if source[0] * math.prod(outputs) * source[1] * math.prod(kernel) < FUSE_MIN_ELEMENTS:
        return None
    return Group(tuple(op.results[0].type.shape), [op], inputs=list(op.operands),
                 outputs=list(op.results), kind="window")


def columns_shape(op: ir.Operation) -> tuple[int, int]:
    """The windows' matrix of one replica: (channels x taps, images x output pixels)."""
    source, kernel, outputs, *_ = _geometry(op)
    return source[1] * math.prod(kernel), source[0] * math.prod(outputs)


def _im2col(name: str, op: ir.Operation) -> str:
    """cols[c, tap, n, pixel] = x[n, c, pixel * stride - padding + tap * dilation], 0
    outside x, for the input x (N, C, *S) of one replica: loops over channels, taps,
    images and the output's rows; along a row, the pixels whose tap lies before x, then
    those inside (a copy, contiguous for stride 1), then those after."""
    source, kernel, outputs, strides, low, dilations, _ = _geometry(op)
    n_images, channels, spatial = source[0], source[1], source[2:]
    d = len(spatial)
    taps, pixels = math.prod(kernel), math.prod(outputs)
    b = _Lines()
    zero = b.const("0.0 : f32")
    pick, compare = b.pick, b.compare

    def fill(lower: str, upper: str, row: str) -> None:
        o = b.loop_from(lower, upper)
        b.store(zero, "%out0", b.emit(f"arith.addi {row}, {o} : i64"), "f32")
        b.close()

    replica = b.loop("%replicas")
    x_replica = b.emit(f"arith.muli {replica}, %step0 : i64")
    cols_replica = b.index(None, [(replica, channels * taps * n_images * pixels)])
    channel = b.loop(channels)
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
    return b.text(_header(name, 1, 1))


def io(group: Group) -> tuple[list, list] | None:
    """The compiled function's (inputs, outputs) as `fusion.FusedKernel` takes them, when
    they are not the group's own: a convolution's function gathers the windows of its
    input alone."""
    op = group.ops[0]
    if op.name == "ipu.conv_transpose":
        source, kernel, result, *_ = _transposed(op)
        products = result[1] * math.prod(kernel) * source[0] * math.prod(source[2:])
        return ([(products, 2, np.dtype(np.float32))], [(result, np.dtype(np.float32))])
    if op.name not in CONVOLUTIONS:
        return None
    x = op.operands[0].type
    return ([(math.prod(x.shape), x.rank, np.dtype(np.float32))],
            [(columns_shape(op), np.dtype(np.float32))])


def call(kernel, group: Group):
    """What the program calls for the group: the kernel, or for a convolution the
    product of the weight (or the output's gradient) with the windows it gathers."""
    op = group.ops[0]
    if op.name == "ipu.conv_transpose":
        return TransposedConvolution(kernel, op)
    if op.name not in CONVOLUTIONS:
        return kernel
    return Convolution(kernel, op)


class _Product:
    """A convolution-family op made of BLAS products and a compiled kernel (`kernel`),
    on the two f32 operands it was compiled for: the first with any leading (replica)
    axes, the second with none or the same. Other operands go to the op's NumPy kernel."""

    def __init__(self, kernel, op: ir.Operation) -> None:
        from poptorch.runtime.jit.kernels import load_all

        self.kernel = kernel
        k = load_all()[op.name]
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


class Convolution(_Product):
    """`ipu.conv(x, w)` or `ipu.conv_weight_grad(x, dy)` on the windows of x that the
    compiled kernel gathers: one BLAS product per replica and group, as the NumPy kernel
    makes them on its own windows (`kernels.convolution.im2col`)."""

    def __init__(self, windows, op: ir.Operation) -> None:
        super().__init__(windows, op)
        self.weight_grad = op.name == "ipu.conv_weight_grad"
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


def _transposed_group(op: ir.Operation) -> Group | None:
    types = [storage(v.type) for v in list(op.operands) + list(op.results)]
    if types != ["f32"] * 3 or op.operands[0].type.rank < 3 or \
            math.prod(op.results[0].type.shape) < FUSE_MIN_ELEMENTS:
        return None
    return Group(tuple(op.results[0].type.shape), [op], inputs=list(op.operands),
                 outputs=list(op.results), kind="window")


def _col2im(name: str, op: ir.Operation) -> str:
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
    b = _Lines()
    zero = b.const("0.0 : f32")
    pick, compare = b.pick, b.compare

    replica = b.loop("%replicas")
    cols_replica = b.emit(f"arith.muli {replica}, %step0 : i64")
    y_replica = b.index(None, [(replica, n_images * channels * area)])
    image = b.loop(n_images)
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
    return b.text(_header(name, 1, 1))


class TransposedConvolution(_Product):
    """`ipu.conv_transpose(x, w)`: one BLAS product per replica and group gives every
    tap's contribution (as the NumPy kernel computes them), which the compiled kernel
    adds into the output in its final layout (`_col2im`)."""

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
