"""ipu ops of the convolution family that training needs: gradients and what they read.

The gradient of a convolution with respect to its input is `ipu.conv_transpose` (of a
transposed convolution, `ipu.conv`), and of its bias an `ipu.reduce`; what is left is
`ipu.conv_weight_grad` (poplin's weight-update pass, calculateWeightDeltas). The pooling
gradients are popnn::pooling's poolInputGradient: `ipu.max_pool_grad` routes each
gradient to the position the forward's indices recorded, `ipu.avg_pool_grad` and
`ipu.adaptive_avg_pool_grad` spread it over the window. `ipu.adaptive_max_pool_with_indices`
is the forward whose indices the gradient of adaptive max pooling scatters to.

Each gradient op's result has its forward's input shape and is checked, with the forward's
output-size formula, against the gradient it takes.
"""

from torch_mlir import ir
from torch_mlir.dialects.ext import Operand, Pure, Result, result

from .convolution import check_result_shape, pool_output_size, spatial_arrays
from .ipu import (
    DenseI64Array,
    Ipu,
    VerifyError,
    bool_attr,
    int_attr,
    shape_str,
    tensor_type,
    verified,
)


def _check_conv_weight_grad(op: "ConvWeightGradOp") -> None:
    """The result is the weight of the `ipu.conv` of `input` with these attributes whose
    output has the gradient's shape."""
    x, grad = tensor_type(op.input, "input"), tensor_type(op.grad_output, "grad_output")
    out = tensor_type(op.output, "result")
    if not x.element_type == grad.element_type == out.element_type:
        raise VerifyError(f"element types differ: input {x.element_type}, grad_output "
                          f"{grad.element_type}, result {out.element_type}")
    if not (x.has_static_shape and grad.has_static_shape):
        raise VerifyError("convolutions need static shapes")
    if x.rank < 3 or grad.rank != x.rank or out.rank != x.rank:
        raise VerifyError(f"input {shape_str(x.shape)}, grad_output {shape_str(grad.shape)} "
                          f"and result {shape_str(out.shape)} must all have rank 2 + the "
                          "number of spatial dimensions (at least 3)")
    strides, low, high, dilations = spatial_arrays(
        op, ("strides", "padding_low", "padding_high", "dilations"), (1, 0, 0, 1), x.rank - 2)
    groups = int_attr(op, "groups", minimum=1)
    (batch, channels), (grad_batch, out_channels) = x.shape[:2], grad.shape[:2]
    if channels % groups or out_channels % groups or batch != grad_batch:
        raise VerifyError(f"input {shape_str(x.shape)} and grad_output {shape_str(grad.shape)} "
                          f"need one batch size and channels that split into {groups} groups")
    kernel = out.shape[2:]
    if list(out.shape[:2]) != [out_channels, channels // groups] or min(kernel) < 1:
        raise VerifyError(f"result {shape_str(out.shape)} should be ({out_channels}, "
                          f"{channels // groups}, kernel...)")
    spatial = [(size + lo + hi - d * (k - 1) - 1) // s + 1 for size, k, s, lo, hi, d in zip(
        x.shape[2:], kernel, strides, low, high, dilations, strict=True)]
    if list(grad.shape[2:]) != spatial:
        raise VerifyError(f"grad_output {shape_str(grad.shape)} should be "
                          f"{shape_str([batch, out_channels, *spatial])}, the shape of the "
                          "convolution's output")


class ConvWeightGradOp(Ipu.Operation, name="conv_weight_grad", traits=[Pure]):
    """The gradient of `ipu.conv(input, weight)` with respect to the weight, given the
    gradient of its output; the attributes are the convolution's.

    `%dw = "ipu.conv_weight_grad"(%x, %dy) {strides = array<i64: 1, 1>, padding_low =
        array<i64: 1, 1>, padding_high = array<i64: 1, 1>, dilations = array<i64: 1, 1>,
        groups = 1 : i64} : (tensor<2x3x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<4x3x3x3xf32>`
    """

    input: Operand[ir.RankedTensorType]
    grad_output: Operand[ir.RankedTensorType]
    strides: DenseI64Array
    padding_low: DenseI64Array
    padding_high: DenseI64Array
    dilations: DenseI64Array
    groups: ir.IntegerAttr
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_conv_weight_grad)


def _pool_grad_types(op: ir.OpView, names: tuple[str, ...]) -> tuple[ir.RankedTensorType, ...]:
    """Gradient and result (the forward's input): one element type, one rank, static."""
    grad, out = tensor_type(op.grad_output, "grad_output"), tensor_type(op.output, "result")
    if grad.element_type != out.element_type:
        raise VerifyError(f"element type changes from {grad.element_type} to "
                          f"{out.element_type}")
    count = len(spatial_arrays(op, names[:1], (1,))[0])
    if out.rank < count + 1 or grad.rank != out.rank or not out.has_static_shape:
        raise VerifyError(f"result {shape_str(out.shape)} must be static with a channel "
                          f"dimension before the {count} pooled ones, and have the rank of "
                          f"grad_output {shape_str(grad.shape)}")
    return grad, out


def _check_window_grad(op: ir.OpView, names: tuple[str, ...], minimums: tuple[int, ...]):
    """The forward pooling of the result's shape with these attributes gives the gradient's
    shape. Returns the arrays `names`."""
    grad, out = _pool_grad_types(op, names)
    arrays = spatial_arrays(op, names, minimums)
    kernel, strides, padding = arrays[:3]
    dilations = arrays[3] if len(arrays) > 3 else [1] * len(kernel)
    for k, p, d in zip(kernel, padding, dilations, strict=True):
        if 2 * p > d * (k - 1) + 1:
            raise VerifyError(f"padding {padding} must be at most half of the window "
                              f"{kernel} (with dilations {dilations})")
    ceil = bool_attr(op, "ceil_mode")
    split = out.rank - len(kernel)
    expected = list(out.shape[:split]) + [
        pool_output_size(*args, ceil) for args in zip(out.shape[split:], kernel, strides,
                                                      padding, dilations, strict=True)]
    try:
        check_result_shape(grad, expected)
    except VerifyError:
        raise VerifyError(f"grad_output {shape_str(grad.shape)} should be "
                          f"{shape_str(expected)}, the pooled shape of the result "
                          f"{shape_str(out.shape)}") from None
    return arrays


def _check_max_pool_grad(op: "MaxPoolGradOp") -> None:
    """Window attributes as ipu.max_pool; integer indices of the gradient's shape."""
    _check_window_grad(op, ("kernel", "strides", "padding", "dilations"), (1, 1, 0, 1))
    indices = tensor_type(op.indices, "indices")
    if (not isinstance(indices.element_type, ir.IntegerType)
            or indices.shape != op.grad_output.type.shape):
        raise VerifyError(f"indices {indices} must be integers of grad_output's shape")


class MaxPoolGradOp(Ipu.Operation, name="max_pool_grad", traits=[Pure]):
    """The gradient of `ipu.max_pool_with_indices`: each gradient goes to (is added at)
    the position of the pooled dims its index names (torch's max_pool2d/3d backward).
    The attributes are the forward's; the result has the forward's input shape.

    `%dx = "ipu.max_pool_grad"(%dy, %i) {kernel = array<i64: 2>, strides = array<i64: 2>,
        padding = array<i64: 0>, dilations = array<i64: 1>, ceil_mode = false}
        : (tensor<1x3x4xf32>, tensor<1x3x4xi64>) -> tensor<1x3x8xf32>`
    """

    grad_output: Operand[ir.RankedTensorType]
    indices: Operand[ir.RankedTensorType]
    kernel: DenseI64Array
    strides: DenseI64Array
    padding: DenseI64Array
    dilations: DenseI64Array
    ceil_mode: ir.IntegerAttr
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_max_pool_grad)


def _check_avg_pool_grad(op: "AvgPoolGradOp") -> None:
    """Window and divisor attributes as ipu.avg_pool."""
    _check_window_grad(op, ("kernel", "strides", "padding"), (1, 1, 0))
    bool_attr(op, "count_include_pad")
    int_attr(op, "divisor")


class AvgPoolGradOp(Ipu.Operation, name="avg_pool_grad", traits=[Pure]):
    """The gradient of `ipu.avg_pool`: each gradient, divided by its window's divisor, is
    added to every input element of the window (torch's avg_pool2d/3d backward). The
    attributes are the forward's; the result has the forward's input shape.

    `%dx = "ipu.avg_pool_grad"(%dy) {kernel = array<i64: 3>, strides = array<i64: 1>,
        padding = array<i64: 1>, ceil_mode = false, count_include_pad = true,
        divisor = 0 : i64} : (tensor<1x3x8xf32>) -> tensor<1x3x8xf32>`
    """

    grad_output: Operand[ir.RankedTensorType]
    kernel: DenseI64Array
    strides: DenseI64Array
    padding: DenseI64Array
    ceil_mode: ir.IntegerAttr
    count_include_pad: ir.IntegerAttr
    divisor: ir.IntegerAttr
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_avg_pool_grad)


def _check_adaptive_avg_pool_grad(op: "AdaptiveAvgPoolGradOp") -> None:
    """The gradient's trailing dims are `output_size`, its others the result's."""
    grad, out = _pool_grad_types(op, ("output_size",))
    (size,) = spatial_arrays(op, ("output_size",), (1,))
    expected = list(out.shape[:out.rank - len(size)]) + size
    if list(grad.shape) != expected:
        raise VerifyError(f"grad_output {shape_str(grad.shape)} should be "
                          f"{shape_str(expected)}: the result's leading dims, then "
                          "output_size")


class AdaptiveAvgPoolGradOp(Ipu.Operation, name="adaptive_avg_pool_grad", traits=[Pure]):
    """The gradient of `ipu.adaptive_avg_pool`: each gradient, divided by its bin's size,
    is added to every input element of the bin (torch's _adaptive_avg_pool2d/3d_backward).

    `%dx = "ipu.adaptive_avg_pool_grad"(%dy) {output_size = array<i64: 3, 3>}
        : (tensor<1x2x3x3xf32>) -> tensor<1x2x8x8xf32>`
    """

    grad_output: Operand[ir.RankedTensorType]
    output_size: DenseI64Array
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_adaptive_avg_pool_grad)


def _check_adaptive_max_pool_with_indices(op: "AdaptiveMaxPoolWithIndicesOp") -> None:
    """As ipu.adaptive_max_pool; the indices are integers of the output's shape."""
    x, out = tensor_type(op.input, "input"), tensor_type(op.output, "result")
    if x.element_type != out.element_type:
        raise VerifyError(f"element type changes from {x.element_type} to {out.element_type}")
    (size,) = spatial_arrays(op, ("output_size",), (1,))
    if x.rank < len(size) + 1 or not x.has_static_shape:
        raise VerifyError(f"input {shape_str(x.shape)} must be static with a channel "
                          f"dimension before the {len(size)} pooled ones")
    check_result_shape(out, list(x.shape[:x.rank - len(size)]) + size)
    indices = tensor_type(op.indices, "indices")
    if not isinstance(indices.element_type, ir.IntegerType) or indices.shape != out.shape:
        raise VerifyError(f"indices {indices} must be integers of the output's shape")


class AdaptiveMaxPoolWithIndicesOp(Ipu.Operation, name="adaptive_max_pool_with_indices",
                                   traits=[Pure]):
    """`ipu.adaptive_max_pool` plus where each maximum is: its index in the flattened
    pooled dims of the input, the first one in the bin (torch's adaptive_max_pool2d/3d).

    `%y, %i = "ipu.adaptive_max_pool_with_indices"(%x) {output_size = array<i64: 3>}
        : (tensor<1x2x8xf32>) -> (tensor<1x2x3xf32>, tensor<1x2x3xi64>)`
    """

    input: Operand[ir.RankedTensorType]
    output_size: DenseI64Array
    output: Result[ir.RankedTensorType] = result()
    indices: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_adaptive_max_pool_with_indices)
