"""ipu ops that slice at a position computed at run time (PopLibs popops dynamicSlice /
dynamicUpdate, poptorch.dynamic_slice / dynamic_update, spec 4.6.6-4.6.7).

The slice's size is static, its start a one-element integer tensor read when the
program runs, so one compiled program slices wherever the data says. The start is
read as popops reads its offset (a `UINT32` PopTorch casts it to): an offset at or past
the end of the dimension is 0, and a slice running past the end wraps round to the
start of the dimension (popops' DynamicSlice2d vertex, graphcore/poplibs
lib/popops/codelets/DynamicSlice2d.cpp: `if (baseSlice >= numBaseElements) baseSlice =
0`, once before the copy and again after each element).
"""

from torch_mlir import ir
from torch_mlir.dialects.ext import Operand, Pure, Result, result

from .ipu import Ipu, VerifyError, int_attr, shape_str, tensor_type, verified


def _start_type(value: ir.Value) -> ir.RankedTensorType:
    """The start operand: a one-element tensor of signless integers."""
    t = tensor_type(value, "start")
    element = t.element_type
    if not (isinstance(element, ir.IntegerType) and element.is_signless and element.width > 1):
        raise VerifyError(f"start must hold signless integers, got {element}")
    if any(size != 1 for size in t.shape):
        raise VerifyError(f"start must hold one element, got {shape_str(t.shape)}")
    return t


def _dim_and_size(op: ir.OpView, t_in: ir.RankedTensorType, size: int) -> int:
    dim = int_attr(op, "dim")
    if dim >= t_in.rank:
        raise VerifyError(f"attribute 'dim' = {dim} is out of range for rank {t_in.rank}")
    if not 1 <= size <= t_in.shape[dim]:
        raise VerifyError(f"slice size {size} is not within 1..{t_in.shape[dim]}, the size "
                          f"of dim {dim}")
    return dim


def _check_dynamic_slice(op: "DynamicSliceOp") -> None:
    """The result is the input with `size` elements along `dim`."""
    t_in = tensor_type(op.input, "input")
    _start_type(op.start)
    size = int_attr(op, "size")
    dim = _dim_and_size(op, t_in, size)
    shape = list(t_in.shape)
    shape[dim] = size
    out = tensor_type(op.output, "result")
    if list(out.shape) != shape or out.element_type != t_in.element_type:
        raise VerifyError(f"result type {out} should have shape {shape_str(shape)} and "
                          f"element type {t_in.element_type}")


class DynamicSliceOp(Ipu.Operation, name="dynamic_slice", traits=[Pure]):
    """`size` consecutive elements of `input` along `dim` from the run-time `start`,
    wrapping round the end of the dimension (popops::dynamicSlice).

    `%s = "ipu.dynamic_slice"(%x, %i) {dim = 0 : i64, size = 2 : i64}
        : (tensor<8x3xf32>, tensor<1xi32>) -> tensor<2x3xf32>`
    """

    input: Operand[ir.RankedTensorType]
    start: Operand[ir.RankedTensorType]
    dim: ir.IntegerAttr
    size: ir.IntegerAttr
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_dynamic_slice)


def _check_dynamic_update(op: "DynamicUpdateOp") -> None:
    """The update fits the input outside `dim`; the result is the input's type."""
    t_in, update = tensor_type(op.input, "input"), tensor_type(op.update, "update")
    _start_type(op.start)
    if update.rank != t_in.rank or update.element_type != t_in.element_type:
        raise VerifyError(f"update {update} must have the rank and element type of input "
                          f"{t_in}")
    dim = int_attr(op, "dim")
    if dim >= t_in.rank:
        raise VerifyError(f"attribute 'dim' = {dim} is out of range for rank {t_in.rank}")
    _dim_and_size(op, t_in, update.shape[dim])
    if any(u != n for d, (u, n) in enumerate(zip(update.shape, t_in.shape, strict=True))
           if d != dim):
        raise VerifyError(f"update {shape_str(update.shape)} does not fit input "
                          f"{shape_str(t_in.shape)} outside dim {dim}")
    out = tensor_type(op.output, "result")
    if out != t_in:
        raise VerifyError(f"result type {out} should be {t_in}")


class DynamicUpdateOp(Ipu.Operation, name="dynamic_update", traits=[Pure]):
    """A copy of `input` with `update` written along `dim` from the run-time `start`,
    wrapping round the end of the dimension (popops::dynamicUpdate).

    `%r = "ipu.dynamic_update"(%x, %u, %i) {dim = 0 : i64}
        : (tensor<8x3xf32>, tensor<2x3xf32>, tensor<1xi32>) -> tensor<8x3xf32>`
    """

    input: Operand[ir.RankedTensorType]
    update: Operand[ir.RankedTensorType]
    start: Operand[ir.RankedTensorType]
    dim: ir.IntegerAttr
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_dynamic_update)
