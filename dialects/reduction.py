"""ipu ops of the reduction family (PopLibs popops::reduce, popnn argMax, cumulative ops).

`ipu.reduce` folds the operand over a set of dimensions with one of the `KINDS`
(popops::reduce's Operation, plus `mean`); `ipu.arg_max` / `ipu.arg_min` give the index
of the first extreme value along one dimension; `ipu.cumsum` / `ipu.cumprod` scan one.
Softmax, norms, variance and the normalisation layers are built from these and the
elementwise ops by the conversion. Dimensions are non-negative and every result type
is exactly what the attributes imply.
"""

from collections.abc import Sequence

from torch_mlir import ir
from torch_mlir.dialects.ext import Operand, Pure, Result, result

from .ipu import (
    Bool,
    DenseI64Array,
    Ipu,
    VerifyError,
    bool_attr,
    i64_array,
    int_attr,
    shape_str,
    str_attr,
    tensor_type,
    verified,
)

# kind -> what `ipu.reduce` computes over the reduced elements
KINDS = {
    "sum": "their sum (not i1)",
    "mean": "their mean (floats only)",
    "prod": "their product (not i1)",
    "max": "their maximum",
    "min": "their minimum",
    "square_sum": "the sum of their squares (floats only; an L2 norm before the sqrt)",
    "any": "whether any is true (i1 only)",
    "all": "whether all are true (i1 only)",
}
BOOLEAN_KINDS = ("any", "all")
ARITHMETIC_KINDS = ("sum", "mean", "prod", "square_sum")
FLOAT_KINDS = ("mean", "square_sum")


def reduced_shape(shape: Sequence[int], dims: Sequence[int], keepdim: bool) -> list[int]:
    """`shape` with `dims` reduced: kept as size 1 with `keepdim`, else dropped."""
    if keepdim:
        return [1 if i in dims else size for i, size in enumerate(shape)]
    return [size for i, size in enumerate(shape) if i not in dims]


def _dim(op: ir.OpView, rank: int) -> int:
    """The `dim` attribute, a dimension of a rank-`rank` operand."""
    dim = int_attr(op, "dim")
    if dim >= rank:
        raise VerifyError(f"dim {dim} is out of range for an operand of rank {rank}")
    return dim


def _check_result_shape(out: ir.RankedTensorType, expected: list[int]) -> None:
    if list(out.shape) != expected:
        raise VerifyError(f"result shape {shape_str(out.shape)} should be {shape_str(expected)}")


def _is_bool(t: ir.Type) -> bool:
    return str(t) == "i1"


def _widens(kind: str, element: ir.Type, result: ir.Type) -> bool:
    """A sum, mean or sum of squares of 16-bit floats into float32: popops::reduce
    accumulates and writes its result in the output's type (the partials type of
    popnn's batch-norm statistics)."""
    return kind in ARITHMETIC_KINDS and kind != "prod" and isinstance(result, ir.F32Type) \
        and isinstance(element, ir.FloatType) and element.width == 16


def _check_reduce(op: "ReduceOp") -> None:
    """A known kind on fitting element types, increasing dims, the reduced result shape."""
    t_in, out = tensor_type(op.input, "operand"), tensor_type(op.output, "result")
    kind = str_attr(op, "kind", KINDS)
    dims = i64_array(op, "dims")
    keepdim = bool_attr(op, "keepdim")
    if any(d < 0 or d >= t_in.rank for d in dims) or dims != sorted(set(dims)):
        raise VerifyError(f"dims {dims} must be increasing dimensions of the rank-{t_in.rank} "
                          "operand")
    element = t_in.element_type
    if out.element_type != element and not _widens(kind, element, out.element_type):
        raise VerifyError(f"element type changes from {element} to {out.element_type}")
    if kind in BOOLEAN_KINDS and not _is_bool(element):
        raise VerifyError(f"reduction \"{kind}\" needs i1 elements, got {element}")
    if kind in ARITHMETIC_KINDS and _is_bool(element):
        raise VerifyError(f"reduction \"{kind}\" does not take i1 elements; cast them first")
    if kind in FLOAT_KINDS and not isinstance(element, ir.FloatType):
        raise VerifyError(f"reduction \"{kind}\" needs float elements, got {element}")
    _check_result_shape(out, reduced_shape(t_in.shape, dims, keepdim))


class ReduceOp(Ipu.Operation, name="reduce", traits=[Pure]):
    """Fold `dims` of the operand with `kind` (popops::reduce); `keepdim` keeps them as 1.

    `%s = "ipu.reduce"(%x) {kind = "sum", dims = array<i64: 1>, keepdim = false}
        : (tensor<3x4xf32>) -> tensor<3xf32>`
    """

    input: Operand[ir.RankedTensorType]
    kind: ir.StringAttr
    dims: DenseI64Array
    keepdim: Bool
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_reduce)


def _check_arg(op: "ArgOp") -> None:
    """`dim` is a dimension, the result holds i32 or i64 indices of the reduced shape."""
    t_in, out = tensor_type(op.input, "operand"), tensor_type(op.output, "result")
    dim = _dim(op, t_in.rank)
    keepdim = bool_attr(op, "keepdim")
    if str(out.element_type) not in ("i32", "i64"):
        raise VerifyError(f"result element type must be i32 or i64, got {out.element_type}")
    _check_result_shape(out, reduced_shape(t_in.shape, [dim], keepdim))


class ArgOp(Ipu.Operation, traits=[Pure]):
    """Base of the index reductions: the first index of the extreme value along `dim`.

    `%i = "ipu.arg_max"(%x) {dim = 1 : i64, keepdim = false} : (tensor<3x4xf32>)
        -> tensor<3xi64>`
    """

    input: Operand[ir.RankedTensorType]
    dim: ir.IntegerAttr
    keepdim: Bool
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_arg)


class ArgMaxOp(ArgOp, name="arg_max"):
    """ipu.arg_max: the first index of the maximum along `dim` (popnn::argMax)."""


class ArgMinOp(ArgOp, name="arg_min"):
    """ipu.arg_min: the first index of the minimum along `dim` (popnn::argMin)."""


def _check_cumulative(op: "CumulativeOp") -> None:
    """`dim` is a dimension and the result has the operand's (non-i1) type."""
    t_in, out = tensor_type(op.input, "operand"), tensor_type(op.output, "result")
    _dim(op, t_in.rank)
    if out != t_in:
        raise VerifyError(f"result type {out} differs from operand type {t_in}")
    if _is_bool(t_in.element_type):
        raise VerifyError("cannot scan i1 elements; cast them to an integer type first")


class CumulativeOp(Ipu.Operation, traits=[Pure]):
    """Base of the scans: element i along `dim` combines elements 0..i.

    `%c = "ipu.cumsum"(%x) {dim = 0 : i64} : (tensor<3x4xf32>) -> tensor<3x4xf32>`
    """

    input: Operand[ir.RankedTensorType]
    dim: ir.IntegerAttr
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_cumulative)


class CumsumOp(CumulativeOp, name="cumsum"):
    """ipu.cumsum: running sum along `dim`."""


class CumprodOp(CumulativeOp, name="cumprod"):
    """ipu.cumprod: running product along `dim`."""
