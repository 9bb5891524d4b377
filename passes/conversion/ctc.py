"""torch -> ipu: poptorch.ctc_beam_search_decoder (`torch.poptorch.ctc_beam_search_decoder`,
poptorch/_ops/ctc_decoder.py) to `ipu.ctc_beam_search_decoder`."""

from __future__ import annotations

from torch_mlir import ir

from poptorch.dialects.ctc import CtcBeamSearchDecoderOp
from poptorch.dialects.ipu import i64

from .common import Builder, Lowering


def ctc_beam_search_decoder(op: ir.OpView, b: Builder) -> list[ir.Value]:
    """ctc_beam_search_decoder(probs, lengths, blank, beam_width, top_paths)."""
    blank, width, paths = (b.scalar(v) for v in op.operands[2:5])
    decoder = CtcBeamSearchDecoderOp(b.tensor(op.operands[0]), b.tensor(op.operands[1]),
                                     i64(blank), i64(width), i64(paths),
                                     b.result_type(0), b.result_type(1), b.result_type(2))
    return list(decoder.results)


OPERATORS: dict[str, Lowering] = {
    "torch.poptorch.ctc_beam_search_decoder": ctc_beam_search_decoder}
