"""The serialised matrix product (poptorch.serializedMatMul, spec 4.6.8): one op that
carries its serialisation, which the JIT runs and the machine model charges slice by
slice.

One op rather than `factor` slices, concatenations and additions in the IR: the slices
are what PopART's MatMul serialisation builds inside one subgraph that it calls `factor`
times (graphcore/popart, tests/popart/transformation_tests/serializematmul.py: one
MatMul in `_subgraph(0)`), and only the op as a whole lets the memory estimate see the
one thing serialisation is for: a single slice's temporary live at a time. Its cost
(runtime/machine/cost_families.py `serialized_matmul`) is `factor` slices in sequence.
"""

from torch_mlir import ir
from torch_mlir.dialects.ext import Operand, Pure, Result, result

from .ipu import (
    Bool,
    Ipu,
    VerifyError,
    binary_types,
    bool_attr,
    dims_compatible,
    int_attr,
    shape_str,
    str_attr,
    verified,
)
from .linear import matmul_shape

# mode -> (operand, axis) it splits: lhs rows, the contracted axis, rhs columns
MODES = {"input_channels": "M", "reducing_dim": "K", "output_channels": "N"}


def serialized_extent(mode: str, lhs: list[int], rhs: list[int]) -> int:
    """The size of the dimension `mode` splits (m, n or p of (m x n) @ (n x p))."""
    return {"input_channels": lhs[-2], "reducing_dim": lhs[-1], "output_channels": rhs[-1]}[mode]


def _check_serialized_matmul(op: "SerializedMatMulOp") -> None:
    """A matmul whose serialised dimension the factor divides."""
    lhs, rhs, out = binary_types(op)
    shape = matmul_shape(lhs.shape, rhs.shape)
    if len(shape) != out.rank or not all(map(dims_compatible, shape, out.shape)):
        raise VerifyError(f"result shape {shape_str(out.shape)} should be {shape_str(shape)}")
    mode = str_attr(op, "mode", MODES)
    factor = int_attr(op, "factor", minimum=1)
    bool_attr(op, "keep_precision")
    extent = serialized_extent(mode, list(op.lhs.type.shape), list(op.rhs.type.shape))
    if extent % factor:
        raise VerifyError(f"factor {factor} does not divide the {mode} dimension ({extent})")


class SerializedMatMulOp(Ipu.Operation, name="serialized_matmul", traits=[Pure]):
    """`lhs @ rhs` as `factor` products one after the other, each on a slice of the
    `mode` dimension (poplin::matMul under PopART's MatMul serialisation); with
    "reducing_dim" the slices' products are summed in fp32 partials when
    `keep_precision`, else in the operands' type.

    `%c = "ipu.serialized_matmul"(%a, %b) {mode = "reducing_dim", factor = 2 : i64,
        keep_precision = false} : (tensor<2x4xf16>, tensor<4x3xf16>) -> tensor<2x3xf16>`
    """

    lhs: Operand[ir.RankedTensorType]
    rhs: Operand[ir.RankedTensorType]
    mode: ir.StringAttr
    factor: ir.IntegerAttr
    keep_precision: Bool
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_serialized_matmul)
