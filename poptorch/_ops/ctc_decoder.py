"""poptorch.ctc_beam_search_decoder (spec 4.6.1): the most likely label sequences of
CTC log probabilities, by beam search. Inference only, as PopTorch's (its custom op
has no gradient: graphcore/poptorch, RegisterAtenOverloads.cpp
`autogradNotImplementedFallback`).

A torch.library custom op (`poptorch::ctc_beam_search_decoder`) that
`ipu-convert-poptorch-ops` lowers to `ipu.ctc_beam_search_decoder`
(passes/conversion/ctc.py); on the CPU it runs the JIT's own beam search
(runtime/jit/kernels/ctc.py), so both give the same paths. The three results are in
the dtype of `probs`, as PopTorch returns them: the paths' log probabilities, their
lengths and their labels (padded with 0).
"""

from __future__ import annotations

import traceback

import torch

from poptorch.errors import Error
from poptorch.runtime.jit.kernels.ctc import decode


@torch.library.custom_op("poptorch::ctc_beam_search_decoder", mutates_args=())
def _ctc_beam_search_decoder(probs: torch.Tensor, lengths: torch.Tensor, blank: int,
                             beam_width: int, top_paths: int
                             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    results = decode(probs.detach().cpu().numpy(), lengths.cpu().numpy(), blank,
                     beam_width, top_paths)
    return tuple(torch.from_numpy(r).to(probs.device) for r in results)


@_ctc_beam_search_decoder.register_fake
def _(probs, lengths, blank, beam_width, top_paths):
    time, batch, _ = probs.shape
    return (probs.new_empty((batch, top_paths)), probs.new_empty((batch, top_paths)),
            probs.new_empty((batch, top_paths, time)))


def _no_gradient(ctx, *grads):
    raise Error("poptorch.ctc_beam_search_decoder has no gradient: it is for inference "
                "only (as PopTorch's); decode in an inferenceModel, or on a detached "
                "tensor", type="api")


_ctc_beam_search_decoder.register_autograd(_no_gradient)


def _error(message: str) -> Error:
    """An API error located at the user's call."""
    frame = traceback.extract_stack(limit=3)[0]
    return Error(message, type="api", location=f"{frame.filename}:{frame.lineno}")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def ctc_beam_search_decoder(probs: torch.Tensor, lengths: torch.Tensor, blank: int = 0,
                            beam_width: int = 100, top_paths: int = 1):
    """The `top_paths` most likely paths of the logarithmic probabilities `probs`
    [input_length, batch_size, num_classes], each batch entry over its first `lengths`
    steps: (probabilities [batch_size, top_paths], lengths [batch_size, top_paths],
    decoded paths [batch_size, top_paths, input_length]) (spec 4.6.1). Inference only."""
    if not isinstance(probs, torch.Tensor):
        raise _error("ctc_beam_search_decoder: probs must be a torch.tensor argument. "
                     f"{type(probs)} is not supported.")
    if not isinstance(lengths, torch.Tensor):
        raise _error("ctc_beam_search_decoder: lengths must be a torch.tensor argument. "
                     f"{type(lengths)} is not supported.")
    if probs.dim() != 3 or not probs.dtype.is_floating_point:
        raise _error("Input probablities tensor must be rank-3 for `ctc_beam_search_decoder`"
                     f" ([input_length, batch_size, num_classes] floats), got a {probs.dtype} "
                     f"tensor of shape {list(probs.shape)}.")
    time, batch, classes = probs.shape
    if list(lengths.shape) != [batch] or lengths.dtype.is_floating_point:
        raise _error(f"ctc_beam_search_decoder: lengths must hold {batch} integers (one per "
                     f"batch entry), got a {lengths.dtype} tensor of shape "
                     f"{list(lengths.shape)}.")
    if not _is_int(blank) or not 0 <= blank < classes:
        raise _error(f"ctc_beam_search_decoder: blank must be one of the {classes} classes "
                     f"(0 to {classes - 1}), got {blank!r}.")
    if not _is_int(beam_width) or beam_width < 1:
        raise _error(f"ctc_beam_search_decoder: beam_width must be a positive int, got "
                     f"{beam_width!r}.")
    if not _is_int(top_paths) or not 1 <= top_paths <= beam_width:
        raise _error(f"ctc_beam_search_decoder: top_paths must be an int from 1 to "
                     f"beam_width ({beam_width}), got {top_paths!r}.")
    if torch.is_grad_enabled() and probs.requires_grad:
        raise _error("poptorch.ctc_beam_search_decoder is for inference only (as "
                     "PopTorch's): it has no gradient. Decode in an inferenceModel, or "
                     "decode probs.detach() outside the loss.")
    return _ctc_beam_search_decoder(probs, lengths, blank, beam_width, top_paths)
