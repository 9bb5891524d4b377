"""Structural ipu ops: inter-IPU copies, host streams, replica collectives.

These carry the partitioning that the multi-IPU passes build: a model is split into
stages placed on IPUs (`func.func`s tagged `ipu.stage = #ipu.stage<stage, ipu>`, see
`dialects/ipu.py` for why stages are functions and not an IRDL region op), values
crossing IPUs go through `ipu.copy`, data enters and leaves through `ipu.host_load` /
`ipu.host_store`, and replicas combine values with `ipu.all_reduce` over a
`#ipu.replica_group`.
"""


from torch_mlir import ir
from torch_mlir.dialects.ext import Operand, Result, result

from .ipu import (
    REPLICA_GROUP_KINDS,
    Ipu,
    ReplicaGroupAttr,
    VerifyError,
    int_attr,
    str_attr,
    tensor_type,
    verified,
)

COLLECTIVE_OPS = ("sum", "mean", "max", "min")


def _check_copy(op: "CopyOp") -> None:
    """A copy moves a tensor unchanged from one IPU to a different one."""
    src, dst = int_attr(op, "src_ipu"), int_attr(op, "dst_ipu")
    if src == dst:
        raise VerifyError(f"copies from IPU {src} to itself; remove the copy")
    t_in = tensor_type(op.input, "input")
    if t_in != op.output.type:
        raise VerifyError(f"result type {op.output.type} differs from input type {t_in}")


class CopyOp(Ipu.Operation, name="copy"):
    """Copy a tensor between IPUs over the IPU-Links.

    `%b = "ipu.copy"(%a) {src_ipu = 0 : i64, dst_ipu = 1 : i64}
        : (tensor<4xf32>) -> tensor<4xf32>`
    """

    input: Operand[ir.RankedTensorType]
    src_ipu: ir.IntegerAttr
    dst_ipu: ir.IntegerAttr
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_copy)


def _check_stream(op: "HostLoadOp | HostStoreOp") -> None:
    """A host stream has a non-empty name."""
    if not str_attr(op, "stream"):
        raise VerifyError("attribute 'stream' must not be empty")


class HostLoadOp(Ipu.Operation, name="host_load"):
    """Read the next value of a host-to-device stream.

    `%x = "ipu.host_load"() {stream = "input0"} : () -> tensor<8x4xf32>`
    """

    stream: ir.StringAttr
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_stream)


class HostStoreOp(Ipu.Operation, name="host_store"):
    """Write a value to a device-to-host stream.

    `"ipu.host_store"(%y) {stream = "output0"} : (tensor<8x2xf32>) -> ()`
    """

    input: Operand[ir.RankedTensorType]
    stream: ir.StringAttr

    verify_invariants = verified(_check_stream)


def check_replica_group(op: ir.OpView, name: str = "group") -> tuple[str, int]:
    """Validate a `#ipu.replica_group` attribute and return (kind, size)."""
    attr = op.attributes[name]
    if not isinstance(attr, ReplicaGroupAttr):
        raise VerifyError(f"attribute '{name}' must be a #ipu.replica_group, got {attr}")
    kind, size = attr.kind.maybe_downcast(), attr.size.maybe_downcast()
    if size.type.width == 1:
        raise VerifyError(f"replica group size must be an integer, got {size}")
    kind, size = kind.value, size.value
    if kind not in REPLICA_GROUP_KINDS:
        choices = ", ".join(f'"{k}"' for k in REPLICA_GROUP_KINDS)
        raise VerifyError(f"replica group kind must be one of {choices}, got \"{kind}\"")
    if kind in ("consecutive", "orthogonal") and size < 1:
        raise VerifyError(f"a \"{kind}\" replica group needs a size >= 1, got {size}")
    if kind in ("all", "no_grouping") and size != 0:
        raise VerifyError(f"a \"{kind}\" replica group takes size 0, got {size}")
    return kind, size


def _check_all_reduce(op: "AllReduceOp") -> None:
    """All-reduce keeps the type and reduces with a known operator over a valid group."""
    str_attr(op, "reduction", COLLECTIVE_OPS)
    check_replica_group(op)
    if op.input.type != op.output.type:
        raise VerifyError(
            f"result type {op.output.type} differs from input type {op.input.type}"
        )


class AllReduceOp(Ipu.Operation, name="all_reduce"):
    """Reduce a tensor across the replicas of each replica group.

    `%g = "ipu.all_reduce"(%x) {reduction = "sum", group = #ipu.replica_group<"all", 0 : i64>}
        : (tensor<4xf32>) -> tensor<4xf32>`
    """

    input: Operand[ir.RankedTensorType]
    reduction: ir.StringAttr
    group: ReplicaGroupAttr
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_all_reduce)


def _check_remote(op: "RemoteLoadOp | RemoteStoreOp") -> None:
    """Streaming-memory transfers name the IPU they load onto or store from."""
    int_attr(op, "ipu")
    if isinstance(op, RemoteLoadOp) and op.input.type != op.output.type:
        raise VerifyError(f"result type {op.output.type} differs from input type {op.input.type}")


class RemoteStoreOp(Ipu.Operation, name="remote_store"):
    """Phased execution: write a tensor from an IPU to streaming memory (Liveness).

    `"ipu.remote_store"(%x) {ipu = 0 : i64} : (tensor<4xf32>) -> ()`
    """

    input: Operand[ir.RankedTensorType]
    ipu: ir.IntegerAttr

    verify_invariants = verified(_check_remote)


class RemoteLoadOp(Ipu.Operation, name="remote_load"):
    """Phased execution: bring a tensor from streaming memory onto an IPU. Its operand is
    the value as it was stored (or a weight, which lives in streaming memory).

    `%y = "ipu.remote_load"(%x) {ipu = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>`
    """

    input: Operand[ir.RankedTensorType]
    ipu: ir.IntegerAttr
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_remote)


def _check_identity(op: "NopOp | PrintOp") -> None:
    """The result is the operand, unchanged."""
    if op.input.type != op.output.type:
        raise VerifyError(f"result type {op.output.type} differs from input type {op.input.type}")


class NopOp(Ipu.Operation, name="nop"):
    """poptorch.nop: the identity, never optimised away (no `Pure` trait).

    `%y = "ipu.nop"(%x) : (tensor<4xf32>) -> tensor<4xf32>`
    """

    input: Operand[ir.RankedTensorType]
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_identity)


class PrintOp(Ipu.Operation, name="print"):
    """poptorch.ipu_print_tensor: copy the tensor to the host, print it after `title`,
    and return it unchanged.

    `%y = "ipu.print"(%x) {title = "a"} : (tensor<4xf32>) -> tensor<4xf32>`
    """

    input: Operand[ir.RankedTensorType]
    title: ir.StringAttr
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_identity)
