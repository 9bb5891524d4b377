"""NumPy kernels of the elementwise family (maths, activations, arithmetic, comparisons)."""

from __future__ import annotations

import numpy as np

from . import align, broadcast_ranks, kernel


def erf(x: np.ndarray) -> np.ndarray:
    """The error function (NumPy has none: scipy's ufunc, in the operand's float type;
    scipy.special is imported on first use, as it takes 0.17 s to import)."""
    from scipy import special

    return special.erf(x).astype(x.dtype, copy=False)


def erfc(x: np.ndarray) -> np.ndarray:
    from scipy import special

    return special.erfc(x).astype(x.dtype, copy=False)


def _float(fn):
    """Apply `fn` in the operand's float type (float16 computes in float32 and rounds)."""
    def apply(x):
        if x.dtype == np.float16:
            return fn(x.astype(np.float32)).astype(np.float16)
        return fn(x)
    return apply


def _sigmoid(x):
    return np.exp(-np.logaddexp(0, -x)).astype(x.dtype, copy=False)


def _gelu(x):
    return (0.5 * x * (1 + erf(x / np.sqrt(2)))).astype(x.dtype, copy=False)


def _gelu_tanh(x):
    inner = np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)
    return (0.5 * x * (1 + np.tanh(inner))).astype(x.dtype, copy=False)


UNARY = {
    "neg": np.negative, "abs": np.abs, "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1,
    "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt,
    "rsqrt": lambda x: (1 / np.sqrt(x)).astype(x.dtype, copy=False),
    "reciprocal": lambda x: (1 / x).astype(x.dtype, copy=False), "square": np.square,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos,
    "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "erf": erf,
    "erfc": erfc, "sigmoid": _sigmoid,
    "relu": lambda x: np.maximum(x, 0).astype(x.dtype, copy=False), "gelu": _gelu,
    "gelu_tanh": _gelu_tanh, "floor": np.floor, "ceil": np.ceil, "round": np.round,
    "trunc": np.trunc, "sign": np.sign, "logical_not": np.logical_not,
    "bitwise_not": np.invert,
}
EXACT = {"neg", "abs", "relu", "floor", "ceil", "round", "trunc", "sign", "logical_not",
         "bitwise_not", "square"}


def _div(a, b):
    if np.issubdtype(a.dtype, np.integer):
        return (np.trunc(a / b)).astype(a.dtype)  # C-style truncating integer division
    return np.true_divide(a, b)


def _fmod(a, b):
    return np.fmod(a, b)


BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": _div,
    "floor_div": np.floor_divide, "remainder": np.remainder, "fmod": _fmod,
    "pow": np.power, "atan2": np.arctan2, "max": np.maximum, "min": np.minimum,
    "logical_and": np.logical_and, "logical_or": np.logical_or,
    "logical_xor": np.logical_xor, "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
    "shift_left": np.left_shift, "shift_right": np.right_shift,
}
COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
           "gt": np.greater, "ge": np.greater_equal}


def _register_unary(name, fn):
    wrapped = fn if name in EXACT else _float(fn)
    kernel(f"ipu.{name}")(lambda x: wrapped(x))


def _register_binary(name, fn):
    def apply(lhs, rhs, ranks=None, out_rank=None):
        lhs, rhs = align((lhs, rhs), ranks, out_rank)
        out = fn(lhs, rhs)
        return out.astype(lhs.dtype, copy=False) if out.dtype != lhs.dtype else out
    kernel(f"ipu.{name}", static=broadcast_ranks)(apply)


def _register_compare(name, fn):
    def apply(lhs, rhs, ranks=None, out_rank=None):
        return fn(*align((lhs, rhs), ranks, out_rank))
    kernel(f"ipu.{name}", static=broadcast_ranks)(apply)


for _name, _fn in UNARY.items():
    _register_unary(_name, _fn)
for _name, _fn in BINARY.items():
    _register_binary(_name, _fn)
for _name, _fn in COMPARE.items():
    _register_compare(_name, _fn)


@kernel("ipu.select", static=broadcast_ranks)
def select(condition, lhs, rhs, ranks=None, out_rank=None):
    return np.where(*align((condition, lhs, rhs), ranks, out_rank))


def _cast_static(op):
    from poptorch.passes.conversion.common import numpy_dtype

    return {"dtype": numpy_dtype(op.output.type.element_type)}


@kernel("ipu.cast", static=_cast_static)
def cast(x, dtype):
    if np.issubdtype(dtype, np.integer) and np.issubdtype(x.dtype, np.floating):
        x = np.trunc(x)
    return x.astype(dtype)
