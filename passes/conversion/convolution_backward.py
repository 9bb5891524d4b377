"""torch -> ipu: the gradients of convolutions and pooling (training's backward ops).

`aten.convolution_backward` becomes forward ops of the other direction plus one weight
op: the input gradient of a convolution is `ipu.conv_transpose` with the same parameters
(and the output_padding that recovers the input's size), that of a transposed
convolution is `ipu.conv`; the weight gradient is `ipu.conv_weight_grad` (for a
transposed convolution with the roles of input and gradient swapped), the bias gradient
an `ipu.reduce` sum over the batch and spatial dims. The pooling backward ops become
`ipu.max_pool_grad` (scattering to the forward's indices), `ipu.avg_pool_grad` and
`ipu.adaptive_avg_pool_grad`, with the forward's attributes. The gradient of replication
padding (`aten.replication_pad{1,2,3}d_backward`, which torch-mlir has no op for: it
comes through `OPERATORS`, see passes/conversion/__init__.py) adds each output position's
gradient to the input position it copies, one constant 0/1 matrix product per dim.

The results of `aten.convolution_backward` that its output_mask leaves out are
`!torch.none`, which a lowering cannot produce (its results are builtin tensors): a
torch-level pattern first asks for every gradient, replacing the unwanted ones by
`torch.constant.none`, and canonicalize then drops the ipu ops computing them.

Every lowering reads and checks its constant operands before it builds anything (see
passes/conversion/convolution.py).
"""

from __future__ import annotations

import re
from functools import partial

import numpy as np
from torch_mlir import ir, rewrite

from poptorch.dialects.convolution import ConvOp, ConvTransposeOp, PadOp
from poptorch.dialects.convolution_backward import (
    AdaptiveAvgPoolGradOp,
    AvgPoolGradOp,
    ConvWeightGradOp,
    MaxPoolGradOp,
)
from poptorch.dialects.ipu import i64, make_bool
from poptorch.dialects.types import Unsupported, builtin_type

from .common import Builder, Lowering, Patterns
from .convolution import array, map_dim, per_dim
from .elementwise import operand
from .reduction import reduce

NONE = "!torch.none"


def request_all_gradients(op: ir.OpView, rewriter: rewrite.PatternRewriter) -> bool:
    """Replace a convolution_backward with `!torch.none` results by one computing all
    three gradients (the unwanted ones become `torch.constant.none`). True: no match."""
    if not any(str(r.type) == NONE for r in op.results):
        return True
    grad, x, weight = (str(op.operands[i].type) for i in range(3))
    match = re.fullmatch(r"!torch\.vtensor<\[[^,\]]*,(\d+)[^\]]*\],(\w+)>", grad)
    if not match:  # no static channel count: the main lowering reports the type
        return True
    bias = f"!torch.vtensor<[{match.group(1)}],{match.group(2)}>"
    with rewriter.ip, op.location:
        true = ir.Operation.create("torch.constant.bool", results=[ir.Type.parse("!torch.bool")],
                                   attributes={"value": ir.BoolAttr.get(True)}).result
        mask = ir.Operation.create("torch.prim.ListConstruct",
                                   results=[ir.Type.parse("!torch.list<bool>")],
                                   operands=[true] * 3).result
        full = ir.Operation.create(op.operation.name,
                                   results=[ir.Type.parse(t) for t in (x, weight, bias)],
                                   operands=[*list(op.operands)[:10], mask])
        none = ir.Operation.create("torch.constant.none",
                                   results=[ir.Type.parse(NONE)]).result
        rewriter.replace_op(op, [none if str(old.type) == NONE else new
                                 for old, new in zip(op.results, full.results, strict=True)])
    return False


def convolution_backward(op: ir.OpView, b: Builder) -> list[ir.Value]:
    """aten.convolution_backward(grad_output, input, weight, bias_sizes, stride, padding,
    dilation, transposed, output_padding, groups, output_mask) -> (grad_input,
    grad_weight, grad_bias)."""
    grad_t, x_t, w_t = (builtin_type(op.operands[i].type) for i in range(3))
    d = w_t.rank - 2
    if d < 1 or x_t.rank != d + 2 or grad_t.rank != d + 2:
        raise Unsupported(f"convolution_backward of {x_t} by {w_t} (expected N, C, "
                          "spatial... and a weight of the same rank)")
    if not (grad_t.has_static_shape and x_t.has_static_shape and w_t.has_static_shape):
        raise Unsupported("convolution_backward needs static shapes")
    if any(str(r.type) == NONE for r in op.results):
        raise Unsupported("a gradient left out by output_mask (request_all_gradients asks "
                          "for it first)")
    strides, padding, dilations = (per_dim(b, op.operands[i], d, name) for i, name in
                                   ((4, "stride"), (5, "padding"), (6, "dilation")))
    transposed = b.scalar(op.operands[7])
    output_padding = per_dim(b, op.operands[8], d, "output_padding", [0] * d)
    groups = i64(b.scalar(op.operands[9]))
    types = [b.result_type(i) for i in range(3)]
    sizes, outputs, kernel = x_t.shape[2:], grad_t.shape[2:], w_t.shape[2:]
    if transposed:
        # the convolution whose input gradient the forward is: the output_padding comes off
        # its high padding, and what exceeds that off the gradient (ipu.pad crops)
        high = [max(p - extra, 0) for p, extra in zip(padding, output_padding, strict=True)]
        crop = [min(p - extra, 0) for p, extra in zip(padding, output_padding, strict=True)]
        recovered = [(o + c + p + h - di * (k - 1) - 1) // s + 1 for o, c, p, h, k, s, di in
                     zip(outputs, crop, padding, high, kernel, strides, dilations, strict=True)]
        if recovered != list(sizes):
            raise Unsupported(f"the input gradient would have size {recovered}, not the "
                              f"input's {list(sizes)}")
    else:
        extra = [n - ((o - 1) * s - 2 * p + di * (k - 1) + 1) for n, o, s, p, k, di in zip(
            sizes, outputs, strides, padding, kernel, dilations, strict=True)]
        if any(e < 0 or e >= max(s, di) for e, s, di in zip(extra, strides, dilations,
                                                           strict=True)):
            raise Unsupported(f"the input gradient's size needs output_padding {extra}")
    element = types[0].element_type
    grad, x, weight = (operand(b, op.operands[i], element) for i in range(3))
    if transposed:
        cropped = grad
        if any(crop):
            shape = [*grad_t.shape[:2], *(o + c for o, c in zip(outputs, crop, strict=True))]
            cropped = PadOp(grad, array([0] * (d + 2)), array([0, 0, *crop]),
                            ir.FloatAttr.get_f64(0.0), ir.StringAttr.get("constant"),
                            ir.RankedTensorType.get(shape, element)).result
        conv = (array(strides), array(padding), array(high), array(dilations), groups)
        grad_input = ConvOp(cropped, weight, *conv, types[0]).result
        grad_weight = ConvWeightGradOp(cropped, x, *conv, types[1]).result
    else:
        grad_input = ConvTransposeOp(grad, weight, array(strides), array(padding),
                                     array(extra), array(dilations), groups, types[0]).result
        grad_weight = ConvWeightGradOp(x, grad, array(strides), array(padding),
                                       array(padding), array(dilations), groups,
                                       types[1]).result
    grad_bias = reduce(grad, "sum", [0, *range(2, d + 2)], False)
    return [grad_input, grad_weight, b.cast(grad_bias, types[2].element_type)]


def window_attrs(b: Builder, op: ir.OpView, d: int) -> tuple[list[int], ...]:
    """kernel, stride (the kernel when empty) and padding: operands 2-4 of the pooling
    backward ops."""
    kernel = per_dim(b, op.operands[2], d, "kernel_size")
    strides = per_dim(b, op.operands[3], d, "stride", kernel)
    padding = per_dim(b, op.operands[4], d, "padding")
    return kernel, strides, padding


def max_pool_backward(d: int, op: ir.OpView, b: Builder) -> ir.Value:
    """aten.max_pool{d}d_with_indices_backward(grad_output, input, kernel_size, stride,
    padding, dilation, ceil_mode, indices)."""
    kernel, strides, padding = window_attrs(b, op, d)
    dilations = per_dim(b, op.operands[5], d, "dilation")
    ceil_mode = make_bool(b.scalar(op.operands[6]))
    return MaxPoolGradOp(b.tensor(op.operands[0]), b.tensor(op.operands[7]), array(kernel),
                         array(strides), array(padding), array(dilations), ceil_mode,
                         b.result_type()).result


def avg_pool_backward(d: int, op: ir.OpView, b: Builder) -> ir.Value:
    """aten.avg_pool{d}d_backward(grad_output, input, kernel_size, stride, padding,
    ceil_mode, count_include_pad, divisor_override?)."""
    kernel, strides, padding = window_attrs(b, op, d)
    ceil_mode, include_pad = (make_bool(b.scalar(v)) for v in op.operands[5:7])
    divisor = b.scalar(op.operands[7])
    if divisor is not None and divisor < 1:
        raise Unsupported(f"divisor_override {divisor} must be positive")
    return AvgPoolGradOp(b.tensor(op.operands[0]), array(kernel), array(strides),
                         array(padding), ceil_mode, include_pad, i64(divisor or 0),
                         b.result_type()).result


def adaptive_avg_pool_backward(d: int, op: ir.OpView, b: Builder) -> ir.Value:
    """aten._adaptive_avg_pool{d}d_backward(grad_output, input): the output size is the
    gradient's."""
    grad = builtin_type(op.operands[0].type)
    return AdaptiveAvgPoolGradOp(b.tensor(op.operands[0]), array(grad.shape[grad.rank - d:]),
                                 b.result_type()).result


def replication_pad_backward(d: int, op: ir.OpView, b: Builder) -> ir.Value:
    """aten.replication_pad{d}d_backward(grad, x, padding): padding (left, right, top,
    bottom, front, back; the last dim first) made output position o of a dim copy input
    position clamp(o - before, 0, n - 1); the gradient of each dim is P^T @ grad with
    P[o, clamp(o - before)] = 1."""
    out = b.result_type()
    padding = b.scalar_list(op.operands[2])
    grad_type = builtin_type(op.operands[0].type)
    if len(padding) != 2 * d or out.rank < d + 1:
        raise Unsupported(f"replication padding {padding} of a rank-{out.rank} tensor")
    result = operand(b, op.operands[0], out.element_type)
    for k in range(d):  # the last dim first, as `padding` lists them
        dim = out.rank - 1 - k
        before, size = padding[2 * k], out.shape[dim]
        count = grad_type.shape[dim]
        copies = np.zeros((count, size), np.float32)
        copies[np.arange(count), np.clip(np.arange(count) - before, 0, size - 1)] = 1
        result = map_dim(b, result, dim, copies.T)
    return result


# aten ops torch-mlir has no op for: `torch.operator "<name>"` -> lowering
OPERATORS: dict[str, Lowering] = {
    f"torch.aten.replication_pad{d}d_backward": partial(replication_pad_backward, d)
    for d in (1, 2, 3)}


def populate_convolution_backward(patterns: Patterns) -> None:
    """Register the convolution and pooling gradient lowerings."""
    patterns.set.add("torch.aten.convolution_backward", request_all_gradients)
    patterns.lower("torch.aten.convolution_backward", convolution_backward)
    for d in (2, 3):
        patterns.lower(f"torch.aten.max_pool{d}d_with_indices_backward",
                       partial(max_pool_backward, d))
        patterns.lower(f"torch.aten.avg_pool{d}d_backward", partial(avg_pool_backward, d))
        patterns.lower(f"torch.aten._adaptive_avg_pool{d}d_backward",
                       partial(adaptive_avg_pool_backward, d))
