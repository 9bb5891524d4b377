"""Scalar MLIR (arith and math ops on f32 and i1) for the body of a fused elementwise
kernel: one emitter per fusible ipu op (`EMITTERS`, keyed by op class), the float32
exp, tanh and erf they need, and the reductions a group may end with (`REDUCTIONS`).

The transcendental functions are written out as arith ops (polynomials, a clamp, and a
power of two made from its exponent bits) rather than `math.exp` or `math.tanh`: LLVM
lowers those to scalar libm calls, which keep the loop from vectorising (a loop calling
tanhf ran 8x slower than NumPy's SIMD tanh). Measured against float64 on 3 million
points of [-110, 95] and of N(0, 9) (`test_fusion.py` asserts the bounds): exp within
1 ulp (NumPy's own float32 exp 2.4 ulp), tanh within 1.3 ulp; erf is the rational
approximation of the NumPy kernels (`kernels/elementwise.py`), which GELU and GELU's
gradient (`ipu.gelu_grad`) go through.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from poptorch.dialects.elementwise import BINARY_OPS, COMPARE_OPS, UNARY_OPS, SelectOp
from poptorch.runtime.jit.kernels.elementwise import _ERF_P, _ERF_Q


def f32_literal(value: float) -> str:
    """`value` as a float32 literal of MLIR: exact, in hex for infinities and NaN."""
    literal = f"{np.float32(value).item()!r}"
    if literal in ("inf", "-inf", "nan"):
        literal = "0x" + np.float32(value).view(np.uint32).tobytes()[::-1].hex().upper()
    return literal


class Body:
    """SSA lines of one loop body, with float32 constants emitted once each."""

    def __init__(self, indent: str) -> None:
        self.lines: list[str] = []
        self.indent = indent
        self.count = 0
        self.constants: dict[str, str] = {}

    def emit(self, text: str) -> str:
        self.count += 1
        name = f"%t{self.count}"
        self.lines.append(f"{self.indent}{name} = {text}")
        return name

    def const(self, value: float, type: str = "f32") -> str:
        literal = f32_literal(value) if type == "f32" else str(int(value))
        key = f"{literal} : {type}"
        if key not in self.constants:
            self.constants[key] = self.emit(f"arith.constant {key}")
        return self.constants[key]

    # f32 arithmetic
    def f(self, op: str, *args: str) -> str:
        return self.emit(f"arith.{op} {', '.join(args)} : f32")

    def m(self, op: str, *args: str) -> str:
        return self.emit(f"math.{op} {', '.join(args)} : f32")

    def cmp(self, predicate: str, a: str, b: str) -> str:
        return self.emit(f"arith.cmpf {predicate}, {a}, {b} : f32")

    def select(self, condition: str, a: str, b: str, type: str = "f32") -> str:
        return self.emit(f"arith.select {condition}, {a}, {b} : {type}")

    def clamp(self, x: str, low: float, high: float) -> str:
        """x clamped to [low, high]; NaN stays NaN (maximumf and minimumf propagate it)."""
        return self.f("minimumf", self.f("maximumf", x, self.const(low)), self.const(high))

    def horner(self, x: str, coefficients) -> str:
        p = self.const(coefficients[0])
        for c in coefficients[1:]:
            p = self.m("fma", p, x, self.const(c))
        return p


def _pow2(b: Body, n: str) -> str:
    """2**n as float32 for an i32 n in [-126, 127]: n + 127 in the exponent bits."""
    biased = b.emit(f"arith.addi {n}, {b.const(127, 'i32')} : i32")
    bits = b.emit(f"arith.shli {biased}, {b.const(23, 'i32')} : i32")
    return b.emit(f"arith.bitcast {bits} : i32 to f32")


# Cephes' expf: exp(x) = 2**n exp(r), n = round(x / ln 2), r = x - n ln 2 (ln 2 in two
# parts), exp(r) by a degree-7 polynomial on |r| <= ln(2) / 2.
_EXP_P = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
          1.6666665459e-1, 5.0000001201e-1)


def exp(b: Body, x: str) -> str:
    """exp(x) for f32: inputs are clamped to [-104, 89], which still gives 0 and inf
    (2**n is two factors, so every n from -150 to 128 is exact); NaN gives NaN."""
    t = b.clamp(x, -104.0, 89.0)
    n = b.m("floor", b.m("fma", t, b.const(1.4426950408889634), b.const(0.5)))
    r = b.m("fma", n, b.const(-0.693359375), t)
    r = b.m("fma", n, b.const(2.12194440e-4), r)
    p = b.horner(r, _EXP_P)
    p = b.m("fma", p, b.f("mulf", r, r), r)
    p = b.f("addf", p, b.const(1.0))
    k = b.emit(f"arith.fptosi {n} : f32 to i32")
    half = b.emit(f"arith.shrsi {k}, {b.const(1, 'i32')} : i32")
    rest = b.emit(f"arith.subi {k}, {half} : i32")
    y = b.f("mulf", b.f("mulf", p, _pow2(b, half)), _pow2(b, rest))
    # fptosi of NaN is poison in LLVM: pass NaN through by a select, which does not
    # propagate poison from the arm it does not choose
    return b.select(b.cmp("uno", x, x), x, y)


# Cephes' tanhf below 0.625: x + x^3 P(x^2)
_TANH_P = (-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1,
           -3.33332819422e-1)


def tanh(b: Body, x: str) -> str:
    """tanh(x) for f32: x + x^3 P(x^2) below |x| = 0.625, 1 - 2 / (exp(2|x|) + 1) with
    x's sign above; tanh(-0.0) is -0.0 and tanh(NaN) NaN."""
    z = b.f("mulf", x, x)
    small = b.m("fma", b.f("mulf", b.horner(z, _TANH_P), z), x, x)
    small = b.m("copysign", small, x)  # x + x * 0 is +0.0 for x = -0.0
    a = b.m("absf", x)
    e = exp(b, b.f("addf", a, a))
    big = b.f("subf", b.const(1.0), b.f("divf", b.const(2.0), b.f("addf", e, b.const(1.0))))
    big = b.m("copysign", big, x)
    return b.select(b.cmp("olt", a, b.const(0.625)), small, big)


def sigmoid(b: Body, x: str) -> str:
    """1 / (1 + exp(-x)), the NumPy kernel's (and PyTorch's CPU) formula."""
    e = exp(b, b.f("negf", x))
    return b.f("divf", b.const(1.0), b.f("addf", b.const(1.0), e))


def erf(b: Body, x: str) -> str:
    """The NumPy kernel's erf: x P(x^2) / Q(x^2) on x clamped to [-4, 4]."""
    t = b.clamp(x, -4.0, 4.0)
    x2 = b.f("mulf", t, t)
    p = b.horner(x2, [float(c) for c in _ERF_P])
    q = b.horner(x2, [float(c) for c in _ERF_Q])
    return b.f("divf", b.f("mulf", p, t), q)


def gelu(b: Body, x: str) -> str:
    """x / 2 (1 + erf(x / sqrt 2))."""
    e = erf(b, b.f("mulf", x, b.const(np.sqrt(0.5))))
    return b.f("mulf", b.f("mulf", b.f("addf", e, b.const(1.0)), x), b.const(0.5))


def gelu_grad(b: Body, grad: str, x: str) -> str:
    """grad (Phi(x) + x phi(x)), the NumPy kernel's formula: Phi through the erf above,
    phi(x) = exp(-x^2 / 2) / sqrt(2 pi) through the exp above."""
    cdf = b.f("mulf", b.f("addf", erf(b, b.f("mulf", x, b.const(np.sqrt(0.5)))),
                          b.const(1.0)), b.const(0.5))
    square = b.f("mulf", b.f("mulf", x, x), b.const(-0.5))
    pdf = b.f("mulf", exp(b, square), b.const(1 / np.sqrt(2 * np.pi)))
    return b.f("mulf", grad, b.f("addf", cdf, b.f("mulf", x, pdf)))


def gelu_tanh(b: Body, x: str) -> str:
    """x / 2 (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))."""
    cube = b.f("mulf", b.f("mulf", x, x), x)
    inner = b.f("mulf", b.m("fma", cube, b.const(0.044715), x), b.const(np.sqrt(2 / np.pi)))
    return b.f("mulf", b.f("mulf", b.f("addf", tanh(b, inner), b.const(1.0)), x),
               b.const(0.5))


def _relu(b: Body, x: str) -> str:
    return b.f("maximumf", x, b.const(0.0))


def _rsqrt(b: Body, x: str) -> str:
    return b.f("divf", b.const(1.0), b.m("sqrt", x))


def cast(b: Body, x: str, source: str, target: str) -> str:
    """`ipu.cast` between f32 and i1 (the casts a fused kernel takes)."""
    if source == target:
        return x
    if source == "f32":  # to i1: nonzero (NaN too), as NumPy's astype(bool)
        return b.cmp("une", x, b.const(0.0))
    return b.emit(f"arith.uitofp {x} : i1 to f32")


def _logical(op: str) -> Callable[..., str]:
    return lambda b, x, y: b.emit(f"arith.{op} {x}, {y} : i1")


def _compare(predicate: str) -> Callable[..., str]:
    return lambda b, x, y: b.cmp(predicate, x, y)


# ipu op class -> (emitter, operand element types, result element type); an emitter takes
# the body and its operands' SSA names. (The dialect's elementwise families are tables of
# op classes by short name: `UNARY_OPS`, `BINARY_OPS`, `COMPARE_OPS`.)
EMITTERS: dict[type, tuple[Callable[..., str], tuple[str, ...], str]] = {
    BINARY_OPS["add"]: (lambda b, x, y: b.f("addf", x, y), ("f32", "f32"), "f32"),
    BINARY_OPS["sub"]: (lambda b, x, y: b.f("subf", x, y), ("f32", "f32"), "f32"),
    BINARY_OPS["mul"]: (lambda b, x, y: b.f("mulf", x, y), ("f32", "f32"), "f32"),
    BINARY_OPS["div"]: (lambda b, x, y: b.f("divf", x, y), ("f32", "f32"), "f32"),
    BINARY_OPS["max"]: (lambda b, x, y: b.f("maximumf", x, y), ("f32", "f32"), "f32"),
    BINARY_OPS["min"]: (lambda b, x, y: b.f("minimumf", x, y), ("f32", "f32"), "f32"),
    BINARY_OPS["gelu_grad"]: (gelu_grad, ("f32", "f32"), "f32"),
    UNARY_OPS["neg"]: (lambda b, x: b.f("negf", x), ("f32",), "f32"),
    UNARY_OPS["abs"]: (lambda b, x: b.m("absf", x), ("f32",), "f32"),
    UNARY_OPS["square"]: (lambda b, x: b.f("mulf", x, x), ("f32",), "f32"),
    UNARY_OPS["sqrt"]: (lambda b, x: b.m("sqrt", x), ("f32",), "f32"),
    UNARY_OPS["rsqrt"]: (_rsqrt, ("f32",), "f32"),
    UNARY_OPS["reciprocal"]: (lambda b, x: b.f("divf", b.const(1.0), x), ("f32",), "f32"),
    UNARY_OPS["relu"]: (_relu, ("f32",), "f32"),
    UNARY_OPS["exp"]: (exp, ("f32",), "f32"),
    UNARY_OPS["tanh"]: (tanh, ("f32",), "f32"),
    UNARY_OPS["sigmoid"]: (sigmoid, ("f32",), "f32"),
    UNARY_OPS["erf"]: (erf, ("f32",), "f32"),
    UNARY_OPS["gelu"]: (gelu, ("f32",), "f32"),
    UNARY_OPS["gelu_tanh"]: (gelu_tanh, ("f32",), "f32"),
    SelectOp: (lambda b, c, x, y: b.select(c, x, y), ("i1", "f32", "f32"), "f32"),
    COMPARE_OPS["eq"]: (_compare("oeq"), ("f32", "f32"), "i1"),
    COMPARE_OPS["ne"]: (_compare("une"), ("f32", "f32"), "i1"),
    COMPARE_OPS["lt"]: (_compare("olt"), ("f32", "f32"), "i1"),
    COMPARE_OPS["le"]: (_compare("ole"), ("f32", "f32"), "i1"),
    COMPARE_OPS["gt"]: (_compare("ogt"), ("f32", "f32"), "i1"),
    COMPARE_OPS["ge"]: (_compare("oge"), ("f32", "f32"), "i1"),
    BINARY_OPS["logical_and"]: (_logical("andi"), ("i1", "i1"), "i1"),
    BINARY_OPS["logical_or"]: (_logical("ori"), ("i1", "i1"), "i1"),
    BINARY_OPS["logical_xor"]: (_logical("xori"), ("i1", "i1"), "i1"),
}

# Ops that are many NumPy passes each: worth a kernel of their own
COMPOSITE: set[type] = {
    *(UNARY_OPS[name] for name in ("exp", "tanh", "sigmoid", "erf", "gelu", "gelu_tanh",
                                   "rsqrt")),
    BINARY_OPS["gelu_grad"], SelectOp,
}

# reduction kind -> (the accumulator's first value, the combining arith op)
REDUCTIONS = {"sum": (0.0, "addf"), "max": (float("-inf"), "maximumf"),
              "min": (float("inf"), "minimumf")}
