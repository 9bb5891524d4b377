"""torch -> ipu: poptorch.serializedMatMul (`torch.poptorch.serialized_matmul`,
poptorch/_ops/matmul.py) to one `ipu.serialized_matmul` carrying its mode, factor and
keep_precision (why one op: dialects/matmul_serialization.py)."""

from __future__ import annotations

from torch_mlir import ir

from poptorch.dialects.ipu import i64, make_bool
from poptorch.dialects.matmul_serialization import MODES, SerializedMatMulOp, serialized_extent
from poptorch.dialects.types import Unsupported, builtin_type

from .common import Builder, Lowering


def serialized_matmul(op: ir.OpView, b: Builder) -> ir.Value:
    """serialized_matmul(lhs, rhs, mode, factor, keep_precision)."""
    mode, factor = b.scalar(op.operands[2]), b.scalar(op.operands[3])
    keep_precision = b.scalar(op.operands[4])
    lhs_t, rhs_t = (builtin_type(v.type) for v in op.operands[:2])
    if mode not in MODES:
        raise Unsupported(f"serialisation mode '{mode}'")
    extent = serialized_extent(mode, list(lhs_t.shape), list(rhs_t.shape))
    if factor < 1 or extent % factor:
        raise Unsupported(f"serialisation factor {factor} does not divide the {mode} "
                          f"dimension ({extent})")
    return SerializedMatMulOp(b.tensor(op.operands[0]), b.tensor(op.operands[1]),
                              ir.StringAttr.get(mode), i64(factor), make_bool(keep_precision),
                              b.result_type()).result


OPERATORS: dict[str, Lowering] = {"torch.poptorch.serialized_matmul": serialized_matmul}
