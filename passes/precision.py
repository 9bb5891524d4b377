"""ipu-precision: the Precision options (and enableStableNorm) as IR the JIT and the
machine model read.

- `partials-type=half|float` (Precision.setPartialsType) tags every ipu.matmul and
  convolution with f16 operands `ipu.partials_type = f16|f32`: its kernel accumulates
  in that type and its cost rule charges the AMP rate of that accumulation. Float
  operands always accumulate in float (PopLibs' poplin: a half partials type is for half
  inputs only).
- `stable-norm=false` (enableStableNorm off, PopTorch's default) rewrites the variance of
  a normalisation, which torch's decomposition computes in two passes
  (sum((x - mean)^2)), into PopLibs' non-stable form: sum(x^2) - sum(x) * mean, one pass
  over x in the working precision, which loses the variance when the mean is large
  (half activations with float32 statistics: sum(x^2) is popnn's SQUARE_ADD reduce of
  the halves into float32).
- `stochastic-rounding` (Precision.enableStochasticRounding) tags every elementwise op,
  cast, matmul and optimizer step (the weight update) with an f16 result
  `ipu.stochastic_rounding`: the JIT computes it in
  f32 and rounds the result to f16 stochastically (up with probability the distance to
  the lower neighbour over the spacing), drawing from the device's generator
  (Options.randomSeed).
- `floating-point-exceptions` (Precision.enableFloatingPointExceptions) tags the module
  `ipu.floating_point_exceptions`: the JIT checks each op's results and raises at the
  first op that turns finite operands into an inf or NaN.

Ops the pass creates carry the `ipu.*` attributes (placement, name scope) of the op
they replace.
"""

from __future__ import annotations

from torch_mlir import ir

from poptorch.dialects import op_class
from poptorch.dialects.convolution import ConvOp, ConvTransposeOp
from poptorch.dialects.convolution_backward import ConvWeightGradOp
from poptorch.dialects.elementwise import BINARY_OPS, UNARY_OPS, CastOp
from poptorch.dialects.linear import MatMulOp
from poptorch.dialects.optimizer import (
    AdamStepOp,
    LambStepOp,
    RmspropStepOp,
    SgdMomentumStepOp,
    SgdStepOp,
)
from poptorch.dialects.reduction import ReduceOp

from .registry import Option, Pass, register

PARTIALS = "ipu.partials_type"
STOCHASTIC = "ipu.stochastic_rounding"
FP_EXCEPTIONS = "ipu.floating_point_exceptions"
_AMP_OPS = (MatMulOp, ConvOp, ConvTransposeOp, ConvWeightGradOp)
_ROUNDED = (*BINARY_OPS.values(), *UNARY_OPS.values(), CastOp, MatMulOp,
            SgdStepOp, SgdMomentumStepOp, AdamStepOp, RmspropStepOp, LambStepOp)


def _is_f16(value: ir.Value) -> bool:
    t = value.type
    return isinstance(t, ir.ShapedType) and isinstance(t.element_type, ir.F16Type)


def _producer(value: ir.Value, cls: type) -> ir.Operation | None:
    owner = value.owner
    if isinstance(owner, ir.Block) or op_class(owner.operation) is not cls:
        return None
    return owner.operation


def _sum_reduce(op: ir.Operation | None) -> bool:
    return (op is not None and op_class(op) is ReduceOp
            and ir.StringAttr(op.attributes["kind"]).value == "sum")


def _same_reduction(a: ir.Operation, b: ir.Operation) -> bool:
    return (str(a.attributes["dims"]) == str(b.attributes["dims"])
            and str(a.attributes["keepdim"]) == str(b.attributes["keepdim"]))


def _variance_parts(reduce: ir.Operation):
    """For `reduce` = sum((x - m)^2) with m = sum(x) / n over the same dims (torch's
    two-pass variance): (x, sum(x), m), else None."""
    if not _sum_reduce(reduce) or not ir.BoolAttr(reduce.attributes["keepdim"]).value:
        return None
    square = _producer(reduce.operands[0], BINARY_OPS["mul"])
    if square is None or square.operands[0] != square.operands[1]:
        return None
    diff = _producer(square.operands[0], BINARY_OPS["sub"])
    if diff is None:
        return None
    x, mean = diff.operands
    narrowed = _producer(mean, CastOp)  # a half normalisation's float32 mean, cast
    if narrowed is not None:
        mean = narrowed.operands[0]
    div = _producer(mean, BINARY_OPS["div"])
    total = _producer(div.operands[0], ReduceOp) if div is not None else None
    if (total is None or not _sum_reduce(total) or total.operands[0] != x
            or not _same_reduction(total, reduce)):
        return None
    return x, total.results[0], mean


def _annotations(op: ir.Operation) -> dict[str, ir.Attribute]:
    attrs = op.attributes
    return {attrs[i].name: attrs[i].attr for i in range(len(attrs))
            if attrs[i].name.startswith("ipu.")}


@register
class Precision(Pass):
    argument = "ipu-precision"
    description = "Apply the Precision options: partials type, stable norm, stochastic " \
                  "rounding, floating-point exceptions"
    options = (
        Option("partials-type", str, "", "Accumulation type of f16 matmuls and "
               "convolutions: half or float (empty: leave them untagged, float)"),
        Option("stable-norm", bool, True, "Keep the two-pass variance of normalisations; "
               "false: rewrite it as sum(x^2) - sum(x) * mean"),
        Option("stochastic-rounding", bool, False,
               "Round f16 results of elementwise ops, casts and matmuls stochastically"),
        Option("floating-point-exceptions", bool, False,
               "Raise at the first op that produces an inf or NaN"),
    )

    def run(self, module: ir.Operation) -> None:
        if self.partials_type not in ("", "half", "float"):
            raise self.error(module, f"partials-type must be half or float, got "
                                     f"'{self.partials_type}'")
        # the JIT runs such modules op by op (no fused kernels)
        for name, on in ((FP_EXCEPTIONS, self.floating_point_exceptions),
                         (STOCHASTIC, self.stochastic_rounding)):
            if on:
                module.attributes[name] = ir.UnitAttr.get()
        for op in self.walk(module):
            cls = op_class(op)
            if self.partials_type and cls in _AMP_OPS and _is_f16(op.operands[0]):
                op.attributes[PARTIALS] = ir.TypeAttr.get(
                    ir.F16Type.get() if self.partials_type == "half" else ir.F32Type.get())
            if self.stochastic_rounding and cls in _ROUNDED \
                    and any(_is_f16(r) for r in op.results):
                op.attributes[STOCHASTIC] = ir.UnitAttr.get()
            if not self.stable_norm and cls is ReduceOp:
                self._plain_variance(op)

    @staticmethod
    def _plain_variance(reduce: ir.Operation) -> None:
        parts = _variance_parts(reduce)
        if parts is None:
            return
        x, total, mean = parts
        t = reduce.results[0].type
        annotations = _annotations(reduce)
        with ir.InsertionPoint(reduce), reduce.location:
            if x.type.element_type != t.element_type:
                # half x, float32 statistics: popnn's SQUARE_ADD reduce, squares taken
                # and summed in float32 (no square of x in half)
                square = ReduceOp(x, ir.StringAttr.get("square_sum"),
                                  reduce.attributes["dims"], reduce.attributes["keepdim"], t)
                squares = square
            else:
                square = BINARY_OPS["mul"](x, x, x.type)
                squares = ReduceOp(square.result, reduce.attributes["kind"],
                                   reduce.attributes["dims"], reduce.attributes["keepdim"], t)
            shift = BINARY_OPS["mul"](total, mean, t)
            plain = BINARY_OPS["sub"](squares.result, shift.result, t)
        for new in dict.fromkeys((square, squares, shift, plain)):
            for name, attr in annotations.items():
                new.operation.attributes[name] = attr
        old_square = reduce.operands[0].owner
        reduce.results[0].replace_all_uses_with(plain.result)
        reduce.erase()
        if not list(old_square.results[0].uses):
            old_square.erase()
