"""torch -> ipu: random draws, on the device's generator (`ipu.random_uniform`,
`ipu.random_normal`; runtime/jit/random.py), which Options.randomSeed seeds and which
every replica draws from separately.

torch-mlir's backend pipeline composes most samplers from `aten.uniform`: rand,
bernoulli (uniform < p), exponential (-log(1 - u) / rate) and RReLU's training slopes.
Lowered before it instead (`BEFORE_BACKEND`): normal draws (randn, randn_like,
x.normal_()), to one `ipu.random_normal` as PopTorch's poprand::normal rather than its
Box-Muller composition of two uniform draws and six elementwise ops; and dropout, whose
composition multiplies by 1 / (1 - p), NaN where p = 1 drops everything (PyTorch gives
zeros). torch.normal with tensor arguments and randperm have no torch-mlir op
(`OPERATORS`): mean + std * N(0, 1) of the broadcast shape, and the order that sorts
uniform draws (PopTorch: top-k of uniform draws).
"""

from __future__ import annotations

from functools import partial

from torch_mlir import ir

from poptorch.dialects.creation import RandomNormalOp, RandomUniformOp
from poptorch.dialects.elementwise import BINARY_OPS, COMPARE_OPS, SelectOp
from poptorch.dialects.indexing import SortOp
from poptorch.dialects.ipu import i64, make_bool
from poptorch.dialects.types import Unsupported

from .common import Builder, Lowering, Patterns
from .elementwise import operand


def _f64(value: float) -> ir.FloatAttr:
    return ir.FloatAttr.get(ir.F64Type.get(), float(value))


def _no_generator(b: Builder, value: ir.Value | None) -> None:
    if value is not None and not b.is_none(value):
        raise Unsupported("an explicit torch.Generator: use Options.randomSeed instead")


def uniform(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.uniform(x, low, high, generator): fresh samples of x's shape (x's values
    unused; rand, bernoulli, exponential and training-mode dropout arrive as this)."""
    _no_generator(b, op.operands[3])
    low, high = (_f64(b.scalar(v)) for v in op.operands[1:3])
    return RandomUniformOp(low, high, b.result_type()).result


def randn(generator_at: int | None, op: ir.OpView, b: Builder) -> ir.Value:
    """randn(size) / randn.generator / randn_like(x): standard normal samples."""
    _no_generator(b, None if generator_at is None else op.operands[generator_at])
    return RandomNormalOp(_f64(0.0), _f64(1.0), b.result_type()).result


def _normal_draw(mean: float, std: float, out: ir.RankedTensorType) -> ir.Value:
    if std < 0:
        raise Unsupported(f"normal expects std >= 0.0, got std={std}")
    return RandomNormalOp(_f64(mean), _f64(std), out).result


def normal_functional(op: ir.OpView, b: Builder) -> ir.Value:
    """aten.normal_functional(x, mean, std, generator): x.normal_(mean, std)."""
    _no_generator(b, op.operands[3])
    return _normal_draw(b.scalar(op.operands[1]), b.scalar(op.operands[2]), b.result_type())


def normal(generator_at: int, op: ir.OpView, b: Builder) -> ir.Value:
    """torch.normal(mean, std[, size]): with float arguments one draw of `mean` and `std`,
    with a tensor one mean + std * N(0, 1) of the broadcast (result) shape."""
    _no_generator(b, op.operands[generator_at])
    out = b.result_type()
    mean, std = op.operands[0], op.operands[1]
    if not (b.is_tensor(mean) or b.is_tensor(std)):
        return _normal_draw(b.scalar(mean), b.scalar(std), out)
    standard = RandomNormalOp(_f64(0.0), _f64(1.0), out).result
    scaled = BINARY_OPS["mul"](operand(b, std, out.element_type), standard, out).result
    return BINARY_OPS["add"](operand(b, mean, out.element_type), scaled, out).result


def randperm(generator_at: int | None, op: ir.OpView, b: Builder) -> ir.Value:
    """randperm(n): the indices that sort n uniform draws."""
    _no_generator(b, None if generator_at is None else op.operands[generator_at])
    out = b.result_type()
    keys_type = ir.RankedTensorType.get(list(out.shape), ir.F32Type.get())
    keys = RandomUniformOp(_f64(0.0), _f64(1.0), keys_type).result
    index = out.element_type if str(out.element_type) in ("i32", "i64") \
        else ir.IntegerType.get_signless(64)
    order = SortOp(keys, i64(0), make_bool(False), keys_type,
                   ir.RankedTensorType.get(list(out.shape), index)).indices
    return b.cast(order, out.element_type)


def native_dropout(op: ir.OpView, b: Builder) -> tuple[ir.Value, ir.Value]:
    """aten.native_dropout(x, p, train) -> (x * keep / (1 - p), keep): keep where a
    uniform draw is at least p (probability 1 - p); p = 1 keeps nothing, giving zeros."""
    out, mask_type = b.result_type(0), b.result_type(1)
    x = b.tensor(op.operands[0])
    p = float(b.scalar(op.operands[1]))
    if b.scalar(op.operands[2]) is False:
        return x, b.constant(True, mask_type.element_type, mask_type.shape)
    draws = RandomUniformOp(_f64(0.0), _f64(1.0), out).result
    keep = COMPARE_OPS["ge"](draws, b.constant(p, out.element_type), mask_type).result
    scale = 1.0 / (1.0 - p) if p < 1 else 0.0
    kept = BINARY_OPS["mul"](x, b.constant(scale, out.element_type), out).result
    return SelectOp(keep, kept, b.constant(0, out.element_type), out).result, keep


# torch ops lowered before torch-mlir's backend pipeline, which would compose them
BEFORE_BACKEND: dict[str, Lowering] = {
    "torch.aten.randn": partial(randn, None),
    "torch.aten.randn.generator": partial(randn, 1),
    "torch.aten.randn_like": partial(randn, None),
    "torch.aten.normal_functional": normal_functional,
    "torch.aten.native_dropout": native_dropout,
}

# aten ops torch-mlir has no op for: `torch.operator "<name>"` -> lowering
OPERATORS: dict[str, Lowering] = {
    "torch.aten.normal.Tensor_Tensor": partial(normal, 2),
    "torch.aten.normal.Tensor_float": partial(normal, 2),
    "torch.aten.normal.float_Tensor": partial(normal, 2),
    "torch.aten.normal.float_float": partial(normal, 3),
    "torch.aten.randperm": partial(randperm, None),
    "torch.aten.randperm.generator": partial(randperm, 1),
}


def populate_random(patterns: Patterns) -> None:
    """Register the random lowerings that run with the other families'."""
    patterns.lower("torch.aten.uniform", uniform)
