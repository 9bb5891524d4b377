"""poptorch.ctc_beam_search_decoder (spec 4.6.1): a real beam search, checked against a
straightforward reference beam search written here and against exhaustive search on
tiny inputs; its shapes and dtypes as PopTorch's; refused in training; argument errors;
its cost on the machine model."""

import collections
import itertools
import math

import pytest
import torch
from torch_mlir import ir

import poptorch
from poptorch.dialects import make_context
from poptorch.runtime.machine.cost import op_cost


class Decoder(torch.nn.Module):
    def __init__(self, **kwargs):
        super().__init__()
        self.kwargs = kwargs

    def forward(self, log_probs, lengths):
        return poptorch.ctc_beam_search_decoder(log_probs, lengths, **self.kwargs)


def reference_beam_search(probs, blank, beam_width):
    """Prefix beam search in probability space (Hannun et al. 2014, as on
    distill.pub/2017/ctc): {prefix: (p ending in blank, p ending in a label)}."""
    beams = {(): (1.0, 0.0)}
    for row in probs:
        nxt = collections.defaultdict(lambda: [0.0, 0.0])
        for prefix, (pb, pnb) in beams.items():
            for c, p in enumerate(row):
                if c == blank:
                    nxt[prefix][0] += (pb + pnb) * p
                elif prefix and prefix[-1] == c:
                    nxt[prefix + (c,)][1] += pb * p
                    nxt[prefix][1] += pnb * p
                else:
                    nxt[prefix + (c,)][1] += (pb + pnb) * p
        beams = dict(sorted(nxt.items(), key=lambda kv: -sum(kv[1]))[:beam_width])
    return sorted(((k, sum(v)) for k, v in beams.items()), key=lambda kv: -kv[1])


def exhaustive(probs, blank):
    """Every alignment, collapsed (repeats merged, blanks removed), summed per labels."""
    totals = collections.Counter()
    for alignment in itertools.product(range(probs.shape[1]), repeat=probs.shape[0]):
        labels = tuple(c for i, c in enumerate(alignment)
                       if c != blank and (i == 0 or alignment[i - 1] != c))
        totals[labels] += math.prod(probs[t, c] for t, c in enumerate(alignment))
    return sorted(totals.items(), key=lambda kv: -kv[1])


def _check(result, expected, b, top_paths, rtol=1e-4):
    probs, lengths, paths = result
    for k, (labels, p) in enumerate(expected[:top_paths]):
        assert math.isclose(math.exp(probs[b, k].item()), p, rel_tol=rtol), (k, labels)
        assert int(lengths[b, k]) == len(labels)
        assert tuple(int(x) for x in paths[b, k, :len(labels)]) == labels


@pytest.mark.parametrize(("beam_width", "top_paths", "blank"), [(1, 1, 0), (4, 3, 2),
                                                                (16, 5, 0)])
def test_matches_a_reference_beam_search(beam_width, top_paths, blank):
    torch.manual_seed(beam_width)
    log_probs = torch.randn(9, 3, 6).log_softmax(-1)
    lengths = torch.tensor([9, 6, 4], dtype=torch.int32)
    model = Decoder(blank=blank, beam_width=beam_width, top_paths=top_paths)
    result = poptorch.inferenceModel(model)(log_probs, lengths)
    for b in range(3):
        probs = log_probs[:lengths[b], b].double().exp().numpy()
        _check(result, reference_beam_search(probs, blank, beam_width), b, top_paths)
        assert torch.all(result[2][b, :, int(result[1][b].max()):] == 0)  # padding
    for ipu_result, cpu_result in zip(result, model(log_probs, lengths), strict=True):
        torch.testing.assert_close(ipu_result, cpu_result)


def test_a_beam_covering_everything_finds_the_exhaustive_answer():
    torch.manual_seed(1)
    log_probs = torch.randn(4, 2, 3).log_softmax(-1)
    result = poptorch.inferenceModel(Decoder(beam_width=100, top_paths=6))(
        log_probs, torch.tensor([4, 3]))
    for b, steps in enumerate((4, 3)):
        _check(result, exhaustive(log_probs[:steps, b].double().exp().numpy(), 0), b, 6)


def test_spec_example_and_poptorch_shapes():
    """Spec listing of 4.6.1 with the defaults (beam_width 100, top_paths 1), PopTorch's
    test shapes; every result in the dtype of the log probabilities, as PopTorch's."""
    class Model(torch.nn.Module):
        def forward(self, log_probs, lengths):
            return poptorch.ctc_beam_search_decoder(log_probs, lengths)

    torch.manual_seed(42)
    log_probs = torch.randn(9, 3, 10)
    lengths = torch.randint(5, 9, (3,), dtype=torch.int)
    result = poptorch.inferenceModel(Model())(log_probs, lengths)
    assert [tuple(r.shape) for r in result] == [(3, 1), (3, 1), (3, 1, 9)]
    assert all(r.dtype == torch.float32 for r in result)
    for b in range(3):  # the logits are not normalised: the search takes them as given
        probs = log_probs[:lengths[b], b].double().exp().numpy()
        _check(result, reference_beam_search(probs, 0, 100), b, 1)


def test_device_iterations_decode_each_batch():
    torch.manual_seed(3)
    log_probs = torch.randn(5, 4, 4).log_softmax(-1)  # [T, B, C]: the batch is dim 1
    lengths = torch.tensor([5, 3, 4, 2])
    model = Decoder(beam_width=6, top_paths=2)
    ipu = poptorch.inferenceModel(model, poptorch.Options().deviceIterations(2))
    # device iterations split dim 0 of every input: lay the batch out first
    out = ipu(log_probs.permute(1, 0, 2).reshape(2, 2, 5, 4).permute(0, 2, 1, 3)
              .reshape(10, 2, 4), lengths)
    for i in range(2):
        expected = model(log_probs[:, 2 * i:2 * i + 2], lengths[2 * i:2 * i + 2])
        for got, want in zip(out, expected, strict=True):
            torch.testing.assert_close(got[2 * i:2 * i + 2], want)


def test_refused_in_training():
    class Trained(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 5)

        def forward(self, x, lengths):
            log_probs = self.fc(x).log_softmax(-1)
            decoded = poptorch.ctc_beam_search_decoder(log_probs, lengths)
            return decoded, poptorch.identity_loss(log_probs.sum(), "sum")

    model = Trained()
    ipu = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(poptorch.Error, match="is for inference only") as info:
        ipu(torch.randn(6, 2, 4), torch.tensor([6, 6]))
    assert f"{__file__}:" in str(info.value)


def _raises(fn, message):
    with pytest.raises(poptorch.Error, match=message) as info:
        fn()
    assert info.value.location.startswith(f"{__file__}:"), info.value.location


def test_argument_errors():
    x, n = torch.randn(5, 2, 4), torch.tensor([5, 5])
    decode = poptorch.ctc_beam_search_decoder
    _raises(lambda: decode([1.0], n), "probs must be a torch.tensor argument")
    _raises(lambda: decode(x, [5, 5]), "lengths must be a torch.tensor argument")
    _raises(lambda: decode(x[0], n), r"Input probablities tensor must be rank-3 .* shape \[2, 4\]")
    _raises(lambda: decode(x, torch.tensor([5])), r"lengths must hold 2 integers")
    _raises(lambda: decode(x, n, blank=4), r"blank must be one of the 4 classes \(0 to 3\), got 4")
    _raises(lambda: decode(x, n, beam_width=0), "beam_width must be a positive int, got 0")
    _raises(lambda: decode(x, n, beam_width=2, top_paths=3),
            r"top_paths must be an int from 1 to beam_width \(2\), got 3")
    _raises(lambda: decode(x.requires_grad_(), n), "is for inference only")


_MODULES = []


def test_cost_grows_with_the_beam():
    def cost(width):
        text = ('func.func @f(%x: tensor<50x8x30xf32>, %n: tensor<8xi32>) -> tensor<8x1xf32> {\n'
                f'  %p, %l, %d = "ipu.ctc_beam_search_decoder"(%x, %n) {{blank = 0 : i64, '
                f'beam_width = {width} : i64, top_paths = 1 : i64}} : (tensor<50x8x30xf32>, '
                'tensor<8xi32>) -> (tensor<8x1xf32>, tensor<8x1xf32>, tensor<8x1x50xf32>)\n'
                '  return %p : tensor<8x1xf32>\n}')
        module = ir.Module.parse(text, make_context())
        _MODULES.append(module)
        op = list(module.body.operations[0].regions[0].blocks[0].operations)[0].operation
        with module.context:
            return op_cost(op)

    narrow, wide = cost(4), cost(64)
    assert 0 < narrow.cycles < wide.cycles
    assert wide.temporary_bytes == 16 * narrow.temporary_bytes == 8 * 64 * 30 * 12
    assert narrow.sync == wide.sync  # one step per time step either way
