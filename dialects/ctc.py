"""The CTC beam search decoder (poptorch.ctc_beam_search_decoder, spec 4.6.1;
popnn::ctc_infer::beamSearchDecoderLogProbabilities): an inference op with three
results, each in the element type of the log probabilities as PopTorch returns them
(graphcore/poptorch, RegisterMetaOps.cpp.inc `ctcBeamSearchDecoder`)."""

from torch_mlir import ir
from torch_mlir.dialects.ext import Operand, Pure, Result, result

from .ipu import Ipu, VerifyError, int_attr, shape_str, tensor_type, verified


def _check_ctc_beam_search_decoder(op: "CtcBeamSearchDecoderOp") -> None:
    """probs [T, B, C], lengths [B]; results [B, P], [B, P], [B, P, T]."""
    probs, lengths = tensor_type(op.probs, "probs"), tensor_type(op.lengths, "lengths")
    if probs.rank != 3 or not isinstance(probs.element_type, ir.FloatType):
        raise VerifyError(f"probs must be a [time, batch, classes] float tensor, got {probs}")
    time, batch, classes = probs.shape
    if list(lengths.shape) != [batch] or not isinstance(lengths.element_type, ir.IntegerType):
        raise VerifyError(f"lengths must be {batch} integers, got {lengths}")
    blank = int_attr(op, "blank")
    width = int_attr(op, "beam_width", minimum=1)
    paths = int_attr(op, "top_paths", minimum=1)
    if blank >= classes:
        raise VerifyError(f"blank {blank} is not one of the {classes} classes")
    if paths > width:
        raise VerifyError(f"top_paths {paths} is more than beam_width {width}")
    expected = ([batch, paths], [batch, paths], [batch, paths, time])
    for name, value, shape in zip(("probabilities", "path_lengths", "paths"),
                                  (op.probabilities, op.path_lengths, op.paths), expected,
                                  strict=True):
        t = tensor_type(value, name)
        if list(t.shape) != shape or t.element_type != probs.element_type:
            raise VerifyError(f"{name} {t} should have shape {shape_str(shape)} and element "
                              f"type {probs.element_type}")


class CtcBeamSearchDecoderOp(Ipu.Operation, name="ctc_beam_search_decoder", traits=[Pure]):
    """The `top_paths` most likely label sequences of each batch entry of the log
    probabilities `probs` (the first `lengths[b]` time steps), by a CTC prefix beam
    search keeping `beam_width` prefixes: their log probabilities, lengths and labels.

    `%p, %l, %d = "ipu.ctc_beam_search_decoder"(%x, %n) {blank = 0 : i64,
        beam_width = 4 : i64, top_paths = 2 : i64} : (tensor<5x3x4xf32>, tensor<3xi32>)
        -> (tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2x5xf32>)`
    """

    probs: Operand[ir.RankedTensorType]
    lengths: Operand[ir.RankedTensorType]
    blank: ir.IntegerAttr
    beam_width: ir.IntegerAttr
    top_paths: ir.IntegerAttr
    probabilities: Result[ir.RankedTensorType] = result()
    path_lengths: Result[ir.RankedTensorType] = result()
    paths: Result[ir.RankedTensorType] = result()

    verify_invariants = verified(_check_ctc_beam_search_decoder)
