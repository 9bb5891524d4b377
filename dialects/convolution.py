"""ipu ops of the convolution family: convolutions, pooling, padding and upsampling.

The granularity is PopLibs': `ipu.conv` / `ipu.conv_transpose` are poplin::convolution
(the bias is a separate broadcast `ipu.add`), `ipu.max_pool` / `ipu.avg_pool` are
popnn::pooling, `ipu.pad` is popops::pad. Layouts are PyTorch's: channels first, spatial
dimensions last (`N, C, D?, H?, W`). Every op checks that its result shape is exactly
the one its operands and attributes give, with PyTorch's output-size formulas.
"""

from torch_mlir import ir
from torch_mlir.dialects.ext import Operand, Pure, Result, result

from .ipu import (
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

PAD_MODES = ("constant",)


class DenseF64Array(ir.DenseF64ArrayAttr):
    """Constraint for `array<f64: ...>` attributes (upsampling scales)."""

    attr_name = "builtin.dense_array"


def spatial_arrays(op: ir.OpView, names: tuple[str, ...], minimums: tuple[int | None, ...],
                   count: int | None = None) -> list[list[int]]:
    """The `array<i64>` attributes `names`, `count` entries each (as many as the first if
    None), each entry >= its attribute's minimum (when not None)."""
    arrays = [i64_array(op, name) for name in names]
    count = len(arrays[0]) if count is None else count
    if count < 1:
        raise VerifyError(f"attribute '{names[0]}' needs at least one entry")
    for name, values, minimum in zip(names, arrays, minimums, strict=True):
        if len(values) != count:
            raise VerifyError(f"attribute '{name}' has {len(values)} entries; expected "
                              f"{count}, one per spatial dimension")
        if minimum is not None and any(v < minimum for v in values):
            raise VerifyError(f"attribute '{name}' entries must be >= {minimum}, got {values}")
    return arrays


def check_result_shape(out: ir.RankedTensorType, expected: list[int]) -> None:
    if any(d < 1 for d in expected):
        raise VerifyError(f"the output would be empty ({shape_str(expected)}): the window is "
                          "larger than the padded input")
    if list(out.shape) != expected:
        raise VerifyError(f"result shape {shape_str(out.shape)} should be {shape_str(expected)}")


def _conv_types(op: ir.OpView) -> tuple[ir.RankedTensorType, ...]:
    """Input (N, C, spatial...), weight of the same rank, one element type, static shapes."""
    x, w = tensor_type(op.input, "input"), tensor_type(op.weight, "weight")
    out = tensor_type(op.output, "result")
    if not x.element_type == w.element_type == out.element_type:
        raise VerifyError(f"element types differ: input {x.element_type}, weight "
                          f"{w.element_type}, result {out.element_type}")
    if not (x.has_static_shape and w.has_static_shape):
        raise VerifyError("convolutions need static shapes")
    if x.rank < 3 or w.rank != x.rank:
        raise VerifyError(f"input {shape_str(x.shape)} and weight {shape_str(w.shape)} must "
                          "both have rank 2 + the number of spatial dimensions (at least 3)")
    return x, w, out


def _check_groups(channels: int, groups: int) -> None:
    if channels % groups:
        raise VerifyError(f"{channels} input channels do not split into {groups} groups")


def _check_conv(op: "ConvOp") -> None:
    """poplin's forward convolution: PyTorch's conv output size with low/high padding."""
    x, w, out = _conv_types(op)
    strides, low, high, dilations = spatial_arrays(
        op, ("strides", "padding_low", "padding_high", "dilations"), (1, 0, 0, 1), x.rank - 2)
    groups = int_attr(op, "groups", minimum=1)
    channels, out_channels = x.shape[1], w.shape[0]
    _check_groups(channels, groups)
    if w.shape[1] != channels // groups or out_channels % groups:
        raise VerifyError(f"weight {shape_str(w.shape)} should be (C_out, {channels // groups}, "
                          f"kernel...) with C_out a multiple of {groups} groups")
    spatial = [(size + lo + hi - d * (k - 1) - 1) // s + 1 for size, k, s, lo, hi, d in zip(
        x.shape[2:], w.shape[2:], strides, low, high, dilations, strict=True)]
    check_result_shape(out, [x.shape[0], out_channels, *spatial])


class ConvOp(Ipu.Operation, name="conv", traits=[Pure]):
    """N-d grouped convolution (cross-correlation, as torch's conv1d/2d/3d).

    `%y = "ipu.conv"(%x, %w) {strides = array<i64: 1, 1>, padding_low = array<i64: 1, 1>,
        padding_high = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64}
        : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>`
    """

    input: Operand[ir.RankedTensorType]
    weight: Operand[ir.RankedTensorType]
    strides: DenseI64Array
    padding_low: DenseI64Array
    padding_high: DenseI64Array
    dilations: DenseI64Array
    groups: ir.IntegerAttr
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_conv)


def _check_conv_transpose(op: "ConvTransposeOp") -> None:
    """The gradient of a convolution with respect to its input: PyTorch's output size."""
    x, w, out = _conv_types(op)
    strides, padding, output_padding, dilations = spatial_arrays(
        op, ("strides", "padding", "output_padding", "dilations"), (1, 0, 0, 1), x.rank - 2)
    groups = int_attr(op, "groups", minimum=1)
    _check_groups(x.shape[1], groups)
    if w.shape[0] != x.shape[1]:
        raise VerifyError(f"weight {shape_str(w.shape)} should be ({x.shape[1]}, "
                          f"C_out / groups, kernel...)")
    for extra, s, d in zip(output_padding, strides, dilations, strict=True):
        if extra >= max(s, d):
            raise VerifyError(f"output_padding {output_padding} must be smaller than the "
                              f"stride or the dilation in every dimension")
    spatial = [(size - 1) * s - 2 * p + d * (k - 1) + extra + 1
               for size, k, s, p, extra, d in zip(x.shape[2:], w.shape[2:], strides, padding,
                                                  output_padding, dilations, strict=True)]
    check_result_shape(out, [x.shape[0], w.shape[1] * groups, *spatial])


class ConvTransposeOp(Ipu.Operation, name="conv_transpose", traits=[Pure]):
    """N-d grouped transposed convolution (torch's conv_transpose1d/2d/3d); the weight is
    (C_in, C_out / groups, kernel...).

    `%y = "ipu.conv_transpose"(%x, %w) {strides = array<i64: 2>, padding = array<i64: 1>,
        output_padding = array<i64: 1>, dilations = array<i64: 1>, groups = 1 : i64}
        : (tensor<1x3x5xf32>, tensor<3x4x3xf32>) -> tensor<1x4x10xf32>`
    """

    input: Operand[ir.RankedTensorType]
    weight: Operand[ir.RankedTensorType]
    strides: DenseI64Array
    padding: DenseI64Array
    output_padding: DenseI64Array
    dilations: DenseI64Array
    groups: ir.IntegerAttr
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_conv_transpose)


def pool_output_size(size: int, kernel: int, stride: int, pad: int, dilation: int,
                     ceil_mode: bool) -> int:
    """PyTorch's pooling_output_shape: windows may overhang the end in ceil mode, but
    none may start in the high padding."""
    span = size + 2 * pad - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)
    out = span // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    return out


def _pool_types(op: ir.OpView, dilations: bool) -> tuple[ir.RankedTensorType, list[int]]:
    """The pooled dims are the trailing `len(kernel)`; returns the input and expected shape."""
    x, out = tensor_type(op.input, "input"), tensor_type(op.output, "result")
    if x.element_type != out.element_type:
        raise VerifyError(f"element type changes from {x.element_type} to {out.element_type}")
    names = ("kernel", "strides", "padding", "dilations")[:4 if dilations else 3]
    arrays = spatial_arrays(op, names, (1, 1, 0, 1)[:len(names)])
    kernel, strides, padding = arrays[:3]
    dils = arrays[3] if dilations else [1] * len(kernel)
    if x.rank < len(kernel) + 1 or not x.has_static_shape:
        raise VerifyError(f"input {shape_str(x.shape)} must be static with a channel "
                          f"dimension before the {len(kernel)} pooled ones")
    for k, p, d in zip(kernel, padding, dils, strict=True):
        if 2 * p > d * (k - 1) + 1:
            raise VerifyError(f"padding {padding} must be at most half of the window "
                              f"{kernel} (with dilations {dils})")
    ceil = bool_attr(op, "ceil_mode")
    spatial = x.shape[x.rank - len(kernel):]
    expected = list(x.shape[:x.rank - len(kernel)]) + [
        pool_output_size(*args, ceil) for args in zip(spatial, kernel, strides, padding, dils,
                                                      strict=True)]
    return out, expected


def _check_max_pool(op: "MaxPoolOp") -> None:
    """Windows over the trailing dims; PyTorch's output size."""
    check_result_shape(*_pool_types(op, dilations=True))


class MaxPoolOp(Ipu.Operation, name="max_pool", traits=[Pure]):
    """Maximum over (dilated) windows of the trailing dims; padding never wins
    (popnn::pooling MAX, torch's max_pool1d/2d/3d).

    `%y = "ipu.max_pool"(%x) {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>,
        padding = array<i64: 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false}
        : (tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf32>`
    """

    input: Operand[ir.RankedTensorType]
    kernel: DenseI64Array
    strides: DenseI64Array
    padding: DenseI64Array
    dilations: DenseI64Array
    ceil_mode: ir.IntegerAttr
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_max_pool)


def _check_max_pool_with_indices(op: "MaxPoolWithIndicesOp") -> None:
    """As max_pool; the indices are integers of the output's shape."""
    _check_max_pool(op)
    indices = tensor_type(op.indices, "indices")
    if (not isinstance(indices.element_type, ir.IntegerType)
            or indices.shape != op.output.type.shape):
        raise VerifyError(f"indices {indices} must be integers of the output's shape")


class MaxPoolWithIndicesOp(Ipu.Operation, name="max_pool_with_indices", traits=[Pure]):
    """`ipu.max_pool` plus where each maximum is: its index in the flattened pooled dims
    of the input, the first one in window order (torch's max_pool2d/3d_with_indices).

    `%y, %i = "ipu.max_pool_with_indices"(%x) {kernel = array<i64: 2>, ...}
        : (tensor<1x3x8xf32>) -> (tensor<1x3x4xf32>, tensor<1x3x4xi64>)`
    """

    input: Operand[ir.RankedTensorType]
    kernel: DenseI64Array
    strides: DenseI64Array
    padding: DenseI64Array
    dilations: DenseI64Array
    ceil_mode: ir.IntegerAttr
    output: Result[ir.RankedTensorType] = result()
    indices: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_max_pool_with_indices)


def _check_avg_pool(op: "AvgPoolOp") -> None:
    """As max_pool, plus the divisor options."""
    check_result_shape(*_pool_types(op, dilations=False))
    bool_attr(op, "count_include_pad")
    int_attr(op, "divisor")


class AvgPoolOp(Ipu.Operation, name="avg_pool", traits=[Pure]):
    """Mean over windows of the trailing dims (popnn::pooling AVG, torch's avg_pool1d/2d/3d).

    The divisor is `divisor` if it is not 0, else the window's size counting padding
    (`count_include_pad`) or not; ceil-mode overhang never counts.

    `%y = "ipu.avg_pool"(%x) {kernel = array<i64: 3>, strides = array<i64: 1>,
        padding = array<i64: 1>, ceil_mode = false, count_include_pad = true,
        divisor = 0 : i64} : (tensor<1x3x8xf32>) -> tensor<1x3x8xf32>`
    """

    input: Operand[ir.RankedTensorType]
    kernel: DenseI64Array
    strides: DenseI64Array
    padding: DenseI64Array
    ceil_mode: ir.IntegerAttr
    count_include_pad: ir.IntegerAttr
    divisor: ir.IntegerAttr
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_avg_pool)


def _check_adaptive_pool(op: "AdaptiveMaxPoolOp | AdaptiveAvgPoolOp") -> None:
    """The trailing result dims are `output_size`; the others are the input's."""
    x, out = tensor_type(op.input, "input"), tensor_type(op.output, "result")
    if x.element_type != out.element_type:
        raise VerifyError(f"element type changes from {x.element_type} to {out.element_type}")
    (size,) = spatial_arrays(op, ("output_size",), (1,))
    if x.rank < len(size) + 1 or not x.has_static_shape:
        raise VerifyError(f"input {shape_str(x.shape)} must be static with a channel "
                          f"dimension before the {len(size)} pooled ones")
    check_result_shape(out, list(x.shape[:x.rank - len(size)]) + size)


class AdaptiveMaxPoolOp(Ipu.Operation, name="adaptive_max_pool", traits=[Pure]):
    """Maximum over `output_size` bins of the trailing dims, bin i spanning
    [floor(i * in / out), ceil((i + 1) * in / out)) (torch's adaptive_max_pool).

    `%y = "ipu.adaptive_max_pool"(%x) {output_size = array<i64: 3, 3, 3>}
        : (tensor<1x2x8x8x8xf32>) -> tensor<1x2x3x3x3xf32>`
    """

    input: Operand[ir.RankedTensorType]
    output_size: DenseI64Array
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_adaptive_pool)


class AdaptiveAvgPoolOp(Ipu.Operation, name="adaptive_avg_pool", traits=[Pure]):
    """Mean over the bins of `ipu.adaptive_max_pool` (torch's adaptive_avg_pool).

    `%y = "ipu.adaptive_avg_pool"(%x) {output_size = array<i64: 3, 3, 3>}
        : (tensor<1x2x8x8x8xf32>) -> tensor<1x2x3x3x3xf32>`
    """

    input: Operand[ir.RankedTensorType]
    output_size: DenseI64Array
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_adaptive_pool)


def _check_pad(op: "PadOp") -> None:
    """`low` / `high` per dim (negative crops); result = input + low + high."""
    x, out = tensor_type(op.input, "input"), tensor_type(op.output, "result")
    if x.element_type != out.element_type:
        raise VerifyError(f"element type changes from {x.element_type} to {out.element_type}")
    if not x.has_static_shape:
        raise VerifyError("pad needs a static input shape")
    low, high = spatial_arrays(op, ("low", "high"), (None, None), x.rank)
    str_attr(op, "mode", PAD_MODES)
    if not isinstance(op.attributes["value"], ir.FloatAttr):
        raise VerifyError(f"attribute 'value' must be a float, got {op.attributes['value']}")
    expected = [size + lo + hi for size, lo, hi in zip(x.shape, low, high, strict=True)]
    if any(d < 0 for d in expected) or list(out.shape) != expected:
        raise VerifyError(f"padding {shape_str(x.shape)} by low {low} and high {high} gives "
                          f"{shape_str(expected)}, not {shape_str(out.shape)}")


class PadOp(Ipu.Operation, name="pad", traits=[Pure]):
    """Pad every dim by `low` / `high` elements of `value` (negative amounts crop;
    popops::pad, torch's constant_pad_nd).

    `%y = "ipu.pad"(%x) {low = array<i64: 0, 1>, high = array<i64: 0, 2>, value = 0.0 : f64,
        mode = "constant"} : (tensor<2x3xf32>) -> tensor<2x6xf32>`
    """

    input: Operand[ir.RankedTensorType]
    low: DenseI64Array
    high: DenseI64Array
    value: ir.FloatAttr
    mode: ir.StringAttr
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_pad)


def _check_upsample(op: "UpsampleNearestOp") -> None:
    """Leading (N, C) dims kept; a dim with a scale > 0 has size floor(in * scale)."""
    x, out = tensor_type(op.input, "input"), tensor_type(op.output, "result")
    if x.element_type != out.element_type:
        raise VerifyError(f"element type changes from {x.element_type} to {out.element_type}")
    attr = op.attributes["scales"]
    if not isinstance(attr, ir.DenseF64ArrayAttr):
        raise VerifyError(f"attribute 'scales' must be an array<f64: ...>, got {attr}")
    scales = list(attr)
    if not scales or x.rank != len(scales) + 2 or not x.has_static_shape:
        raise VerifyError(f"input {shape_str(x.shape)} must be static with rank 2 + "
                          f"{len(scales)} (one scale per spatial dim)")
    if any(s < 0 for s in scales):
        raise VerifyError(f"scales {scales} must be >= 0")
    if out.rank != x.rank or list(out.shape[:2]) != list(x.shape[:2]):
        raise VerifyError(f"result {shape_str(out.shape)} must keep the input's rank and "
                          f"leading dims {shape_str(x.shape[:2])}")
    for size, scale, got in zip(x.shape[2:], scales, out.shape[2:], strict=True):
        if got < 1 or scale > 0 and got != int(size * scale):
            raise VerifyError(f"result shape {shape_str(out.shape)} does not match input "
                              f"{shape_str(x.shape)} scaled by {scales}")


class UpsampleNearestOp(Ipu.Operation, name="upsample_nearest", traits=[Pure]):
    """Nearest-neighbour resize of the spatial dims, as PyTorch's upsample_nearest2d.

    Output index o reads input o if out == in, else min(floor(o * step), in - 1) in
    float32, where step is 1 / scale, or in / out where `scales` holds 0 (the size was
    given). (PyTorch's 1-d and 3-d kernels skip the out == in case: torch-mlir's
    decompositions bring those here already as gathers.)

    `%y = "ipu.upsample_nearest"(%x) {scales = array<f64: 2.0, 2.0>}
        : (tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf32>`
    """

    input: Operand[ir.RankedTensorType]
    scales: DenseF64Array
    output: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_upsample)
