"""ipu ops that create tensors: constants, index ranges and random draws."""

from typing import Any

from torch_mlir import ir
from torch_mlir.dialects.ext import Pure, Result, result

from .ipu import Ipu, VerifyError, int_attr, tensor_type, verified


def _check_constant(op: "ConstantOp") -> None:
    """The value is a dense elements attribute of the result type."""
    out = tensor_type(op.output, "result")
    if not isinstance(op.value, ir.DenseElementsAttr):
        raise VerifyError(f"attribute 'value' must be a dense elements attribute, got {op.value}")
    if op.value.type != out:
        raise VerifyError(f"value of type {op.value.type} does not match the result type {out}")


class ConstantOp(Ipu.Operation, name="constant", traits=[Pure]):
    """A tensor known at compile time.

    `%c = "ipu.constant"() {value = dense<1.0> : tensor<2xf32>} : () -> tensor<2xf32>`
    """

    value: Any  # a dense elements attribute: IRDL cannot name that class
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_constant)


def constant(value: ir.DenseElementsAttr) -> ir.Value:
    """An `ipu.constant` holding `value`. Built generically: the IRDL builder takes an
    attribute that is false in Python for missing, and an empty tensor's is (`len` 0)."""
    return ir.Operation.create(ConstantOp.OPERATION_NAME, results=[value.type],
                               attributes={"value": value}).result


def _check_iota(op: "IotaOp") -> None:
    """Counting along an existing dimension of the result."""
    out = tensor_type(op.output, "result")
    dim = int_attr(op, "dim")
    if dim >= out.rank:
        raise VerifyError(f"dim {dim} is out of range for a result of rank {out.rank}")


class IotaOp(Ipu.Operation, name="iota", traits=[Pure]):
    """0, 1, 2, ... along `dim`, broadcast over the other dimensions (popops::iota).

    `%i = "ipu.iota"() {dim = 0 : i64} : () -> tensor<5xi32>`
    """

    dim: ir.IntegerAttr
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_iota)


def _float_draws(op: ir.OpView, first: str, second: str) -> tuple[ir.FloatAttr, ir.FloatAttr]:
    """A random op's float result and its two float attributes (its distribution's
    parameters)."""
    out = tensor_type(op.output, "result")
    if not isinstance(out.element_type, ir.FloatType):
        raise VerifyError(f"result element type must be a float, got {out.element_type}")
    a, b = op.attributes[first], op.attributes[second]
    if not (isinstance(a, ir.FloatAttr) and isinstance(b, ir.FloatAttr)):
        raise VerifyError(f"attributes '{first}' and '{second}' must be floats")
    return a, b


def _check_random_uniform(op: "RandomUniformOp") -> None:
    """A float result and low <= high."""
    low, high = _float_draws(op, "low", "high")
    if low.value > high.value:
        raise VerifyError(f"low {low.value} is above high {high.value}")


class RandomUniformOp(Ipu.Operation, name="random_uniform"):
    """Uniform samples in [low, high) from the device's random generator (poprand::uniform);
    every replica draws its own. Not `Pure`: two draws are different values.

    `%r = "ipu.random_uniform"() {low = 0.0 : f64, high = 1.0 : f64} : () -> tensor<4xf32>`
    """

    low: ir.FloatAttr
    high: ir.FloatAttr
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_random_uniform)


def _check_random_normal(op: "RandomNormalOp") -> None:
    """A float result and a standard deviation of at least 0."""
    mean, std = _float_draws(op, "mean", "std")
    if std.value < 0:
        raise VerifyError(f"std {std.value} is negative")


class RandomNormalOp(Ipu.Operation, name="random_normal"):
    """Normal samples of `mean` and `std` from the device's random generator
    (poprand::normal); every replica draws its own. Not `Pure`, as random_uniform.

    `%r = "ipu.random_normal"() {mean = 0.0 : f64, std = 1.0 : f64} : () -> tensor<4xf32>`
    """

    mean: ir.FloatAttr
    std: ir.FloatAttr
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_random_normal)
