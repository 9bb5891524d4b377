"""NumPy kernel of `ipu.ctc_beam_search_decoder`: a CTC prefix beam search in log space
(popnn::ctc_infer's semantics; graphcore/poplibs, include/popnn/CTCInference.hpp and
its reference tests/poplibs_test/CTCInference: beams of label prefixes, each with the
probability of its alignments ending in a blank and in a label, extended by every
class at every time step, merged, sorted and pruned to `beam_width`).

At each step a prefix is extended by a blank (it stays), by its last label (it stays,
unless its alignment ended in a blank: then the label repeats) or by another label.
Ties between prefixes of equal probability keep the lexicographically smaller prefix
first, so the result is deterministic. A batch entry with fewer surviving prefixes
than `top_paths` reports the rest as probability -inf, length 0. Decoded labels are
padded with 0 after the path's length.
"""

from __future__ import annotations

import numpy as np

from poptorch.dialects.ctc import CtcBeamSearchDecoderOp
from poptorch.runtime.jit.kernels.registry import kernel

NEG_INF = -np.inf


def beam_search(log_probs: np.ndarray, blank: int, beam_width: int
                ) -> list[tuple[tuple[int, ...], float]]:
    """(prefix, log probability) of the beams after the T x C steps of `log_probs`,
    most likely first."""
    beams: dict[tuple[int, ...], tuple[float, float]] = {(): (0.0, NEG_INF)}
    for step in log_probs.astype(np.float64):
        grown: dict[tuple[int, ...], list[float]] = {}

        def add(prefix, blank_end, label_end, grown=grown):
            entry = grown.setdefault(prefix, [NEG_INF, NEG_INF])
            entry[0] = np.logaddexp(entry[0], blank_end)
            entry[1] = np.logaddexp(entry[1], label_end)

        for prefix, (p_blank, p_label) in beams.items():
            total = np.logaddexp(p_blank, p_label)
            add(prefix, total + step[blank], NEG_INF)
            last = prefix[-1] if prefix else None
            for c in range(step.shape[0]):
                if c == blank:
                    continue
                if c == last:
                    add(prefix, NEG_INF, p_label + step[c])  # the label continues
                    add(prefix + (c,), NEG_INF, p_blank + step[c])  # a repeat after blank
                else:
                    add(prefix + (c,), NEG_INF, total + step[c])
        ranked = sorted(grown.items(), key=lambda kv: (-np.logaddexp(*kv[1]), kv[0]))
        beams = {prefix: tuple(p) for prefix, p in ranked[:beam_width]}
    ranked = sorted(((prefix, float(np.logaddexp(*p))) for prefix, p in beams.items()),
                    key=lambda kv: (-kv[1], kv[0]))
    return [(prefix, p) for prefix, p in ranked if p > NEG_INF]


def decode(probs: np.ndarray, lengths: np.ndarray, blank: int, beam_width: int,
           top_paths: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The decoder on [T, B, C] log probabilities: ([B, P], [B, P], [B, P, T])."""
    time, batch, _ = probs.shape
    out_p = np.full((batch, top_paths), NEG_INF, dtype=probs.dtype)
    out_l = np.zeros((batch, top_paths), dtype=probs.dtype)
    out_d = np.zeros((batch, top_paths, time), dtype=probs.dtype)
    for b in range(batch):
        steps = int(np.clip(lengths[b], 0, time))
        for k, (prefix, p) in enumerate(beam_search(probs[:steps, b], blank,
                                                    beam_width)[:top_paths]):
            out_p[b, k], out_l[b, k] = p, len(prefix)
            out_d[b, k, :len(prefix)] = prefix
    return out_p, out_l, out_d


@kernel(CtcBeamSearchDecoderOp, fresh=True)
def ctc_beam_search_decoder(probs, lengths, blank, beam_width, top_paths):
    if probs.ndim == 3:
        return decode(probs, lengths, blank, beam_width, top_paths)
    # leading (replica, micro-batch) axes: decode each
    lead = probs.shape[:-3]
    flat_p = probs.reshape((-1,) + probs.shape[-3:])
    flat_n = np.broadcast_to(lengths, lead + lengths.shape[-1:]).reshape(
        (-1,) + lengths.shape[-1:])
    parts = [decode(p, n, blank, beam_width, top_paths)
             for p, n in zip(flat_p, flat_n, strict=True)]
    return tuple(np.stack(arrays).reshape(lead + arrays[0].shape)
                 for arrays in zip(*parts, strict=True))
