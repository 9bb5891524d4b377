"""Tied weights (issue 20, item 5): one parameter under several names (an embedding that
is also the output projection, as GPT-2's `transformer.wte.weight` is `lm_head.weight`)
is one device variable: one argument of the program, its gradients under every name
summed, one optimizer update, the trained value in the host tensor both names share;
pipelined over two IPUs, the gradient and the updated weight cross the IPU-Links in the
machine model. Every run is checked against the same loop in PyTorch on the CPU."""

import copy
import sys
from pathlib import Path

import pytest
import torch

import poptorch

STEPS, MICRO_BATCH, VOCAB, WIDTH = 3, 2, 16, 8
RTOL, ATOL = 1e-4, 1e-5


class TiedLM(torch.nn.Module):
    """Embedding -> Linear -> tanh -> output projection tied to the embedding."""

    def __init__(self, pipelined=False):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, WIDTH)
        self.mid = torch.nn.Linear(WIDTH, WIDTH)
        self.head = torch.nn.Linear(WIDTH, VOCAB, bias=False)
        self.head.weight = self.emb.weight
        if pipelined:
            self.head = poptorch.BeginBlock(self.head, ipu_id=1)

    def forward(self, tokens, labels):
        logits = self.head(torch.tanh(self.mid(self.emb(tokens))))
        return logits, torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB),
                                                         labels.reshape(-1))


OPTIMIZERS = {
    "sgd_momentum": lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9),
    "adam": lambda params: torch.optim.Adam(params, lr=0.01),
}


def reference_steps(model, optimizer, batches, accumulation):
    """Per step: zero the gradients, backward(loss / N) for each of the N micro-batches,
    one optimizer step (what a poptorch step with gradientAccumulation(N) computes)."""
    losses = []
    for inputs in batches:
        optimizer.zero_grad()
        for g in range(accumulation):
            part = [x[g * MICRO_BATCH:(g + 1) * MICRO_BATCH] for x in inputs]
            _, loss = model(*part)
            (loss / accumulation).backward()
        losses.append(loss.detach())
        optimizer.step()
    return losses


def token_batches(accumulation, vocab=VOCAB, length=5):
    torch.manual_seed(1)
    return [(tokens, tokens.roll(1, 1)) for tokens in
            (torch.randint(0, vocab, (accumulation * MICRO_BATCH, length))
             for _ in range(STEPS))]


def train_both(model, make_optimizer, accumulation):
    """STEPS poptorch steps of `model` and the CPU loop on a copy: (poptorch executor,
    its optimizer, the CPU model, the CPU optimizer, poptorch losses, CPU losses)."""
    reference = copy.deepcopy(model)
    opts = poptorch.Options()
    opts.Training.gradientAccumulation(accumulation)
    optimizer = make_optimizer(model.parameters())
    trainer = poptorch.trainingModel(model, opts, optimizer)
    batches = token_batches(accumulation)
    losses = [trainer(*inputs)[1] for inputs in batches]
    cpu_optimizer = make_optimizer(reference.parameters())
    expected = reference_steps(reference, cpu_optimizer, batches, accumulation)
    return trainer, optimizer, reference, cpu_optimizer, losses, expected


def check_against_cpu(model, reference, losses, expected):
    for step, (loss, cpu) in enumerate(zip(losses, expected, strict=True)):
        torch.testing.assert_close(loss.reshape(-1)[-1], cpu, rtol=RTOL, atol=ATOL,
                                   msg=f"loss of step {step}")
    state, cpu_state = model.state_dict(), reference.state_dict()
    assert state.keys() == cpu_state.keys()
    for name, value in state.items():
        torch.testing.assert_close(value, cpu_state[name], rtol=RTOL, atol=ATOL, msg=name)


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_tied_weight_trains_like_the_cpu(optimizer):
    torch.manual_seed(0)
    model = TiedLM()
    trainer, opt, reference, cpu_opt, losses, expected = train_both(
        model, OPTIMIZERS[optimizer], 1)
    check_against_cpu(model, reference, losses, expected)
    # one variable: one argument and one gradient, under the first name
    names = trainer.getTensorNames()
    assert "emb.weight" in names and "head.weight" not in names
    assert trainer._compiled.captured.trainable == ["emb.weight", "mid.weight", "mid.bias"]
    # the host tensor both names share holds the trained value
    assert model.head.weight is model.emb.weight
    trainer.copyWeightsToHost()
    torch.testing.assert_close(model.head.weight, reference.emb.weight, rtol=RTOL, atol=ATOL)
    # the optimizer's state: one entry for the tied weight, as torch's own
    state, cpu_state = opt.state_dict(), cpu_opt.state_dict()
    assert state["state"].keys() == cpu_state["state"].keys()
    for index, entry in cpu_state["state"].items():
        for key, value in entry.items():
            torch.testing.assert_close(torch.as_tensor(state["state"][index][key]).float(),
                                       torch.as_tensor(value).float(), rtol=RTOL, atol=ATOL,
                                       msg=f"{index} {key}")
    opt.load_state_dict(state)  # and back onto the device
    trainer(*token_batches(1)[0])


def test_tied_weight_pipelined_over_two_ipus():
    """Embedding (and the tied weight's first use) on IPU 0, the output projection on IPU
    1: the projection's gradient is copied to IPU 0 and summed there every micro-batch,
    IPU 0 updates the weight once a step and sends it to IPU 1."""
    torch.manual_seed(0)
    model = TiedLM(pipelined=True)
    trainer, _, reference, _, losses, expected = train_both(
        model, OPTIMIZERS["sgd_momentum"], 4)
    check_against_cpu(model, reference, losses, expected)
    assert model.head.weight is model.emb.weight

    compiled = trainer._compiled
    index = [a.name for a in compiled.captured.arguments].index("emb.weight")
    memory = trainer.getMemoryEstimate()
    assert memory.argument_ipus[index] == [0, 1]  # read on both IPUs
    assert memory.update_ipus[index] == 0  # updated on one
    # its momentum on IPU 0 only: IPU 1 holds no other trainable weight
    weight_bytes = VOCAB * WIDTH * 4
    assert memory.ipus[1].classes["optimizer"] == 0
    assert memory.ipus[0].classes["optimizer"] >= weight_bytes
    # the gradient of the projection crosses the IPU-Links (an ipu.copy from IPU 1)
    text = compiled.module_text
    copies = [line for line in text.splitlines() if '"ipu.copy"' in line
              and "src_ipu = 1" in line and f"tensor<{VOCAB}x{WIDTH}xf32>" in line]
    assert len(copies) == 1
    # the step: IPU 0 updates the weight, then sends it to IPU 1
    timeline = trainer.getTimeline()
    step_end = [e for events in timeline.events.values() for e in events
                if e.micro_batch is None and e.step == 0]
    updates = [e for e in step_end if e.kind == "optimizer"]
    sent = [e for e in step_end if e.kind == "copy"]
    assert [e.name for e in sent] == ["emb.weight (updated on IPU 0)"]
    assert sent[0] in timeline.events[1]
    assert sent[0].end - sent[0].start == timeline.machine.copy_cycles(weight_bytes, 0, 1, 2)
    assert sent[0].start >= max(e.end for e in updates if e in timeline.events[0])


def test_weight_reused_in_two_stages():
    """The same weight read by two pipeline stages without a second name (a module's
    weight used again by a later block): its summed gradient runs in the backward of
    the earlier block, the one computed last, so stages still ascend."""
    class Reused(TiedLM):
        def __init__(self):
            super().__init__()
            self.head = poptorch.BeginBlock(torch.nn.Identity(), ipu_id=1)

        def forward(self, tokens, labels):
            hidden = self.head(torch.tanh(self.mid(self.emb(tokens))))
            logits = torch.nn.functional.linear(hidden, self.emb.weight)
            return logits, torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB),
                                                             labels.reshape(-1))

    torch.manual_seed(0)
    model = Reused()
    trainer, _, reference, _, losses, expected = train_both(
        model, OPTIMIZERS["sgd_momentum"], 4)
    check_against_cpu(model, reference, losses, expected)
    index = [a.name for a in trainer._compiled.captured.arguments].index("emb.weight")
    assert trainer.getMemoryEstimate().argument_ipus[index] == [0, 1]
    assert trainer.getMemoryEstimate().update_ipus[index] == 0


def test_tied_weight_inference_is_one_argument():
    torch.manual_seed(0)
    model = TiedLM(pipelined=True).eval()
    tokens, labels = token_batches(2)[0]
    expected = model(tokens, labels)
    inference = poptorch.inferenceModel(model, poptorch.Options().deviceIterations(2))
    logits, _ = inference(tokens, labels)
    torch.testing.assert_close(logits, expected[0], rtol=RTOL, atol=ATOL)
    names = inference.getTensorNames()
    assert "emb.weight" in names and "head.weight" not in names


def test_tied_float64_weight_stays_tied():
    """64-bit weights are narrowed for capture on a copy: a tied one stays one tensor."""
    torch.manual_seed(0)
    model = TiedLM().double()
    reference = copy.deepcopy(model)
    trainer = poptorch.trainingModel(model, optimizer=torch.optim.SGD(model.parameters(),
                                                                      lr=0.1))
    tokens, labels = token_batches(1)[0]
    trainer(tokens, labels)
    assert trainer._compiled.captured.trainable == ["emb.weight", "mid.weight", "mid.bias"]
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    reference(tokens, labels)[1].backward()
    optimizer.step()
    assert model.head.weight is model.emb.weight
    assert model.emb.weight.dtype == torch.float64
    torch.testing.assert_close(model.emb.weight, reference.emb.weight, rtol=RTOL, atol=ATOL)


def test_tied_buffer_updates_once_per_use():
    """A buffer under two names, updated in place under both: one tensor, as on the CPU."""
    class Counter(torch.nn.Module):
        def __init__(self, count=None):
            super().__init__()
            self.register_buffer("count", torch.zeros(()) if count is None else count)

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(2, 2)
            self.a = Counter()
            self.b = Counter(self.a.count)

        def forward(self, x):
            self.a.count.add_(1)
            self.b.count.add_(2)
            return self.fc(x).sum() * self.b.count

    model = Model()
    trainer = poptorch.trainingModel(model)
    trainer(torch.randn(2, 2))
    trainer(torch.randn(2, 2))
    assert [n for n in trainer.getTensorNames() if n.endswith("count")] == ["a.count"]
    assert model.a.count is model.b.count
    assert model.b.count.item() == 6.0


# ---- GPT-2 ----------------------------------------------------------------------------
def _transformers():
    sys.path.insert(0, str(Path(__file__).parents[1] / "models"))
    from zoo import import_torchvision

    import_torchvision()  # transformers imports torchvision (a CUDA build here)
    return pytest.importorskip("transformers")


class GPT2WithLoss(torch.nn.Module):
    def __init__(self, transformers):
        super().__init__()
        config = transformers.GPT2Config(
            n_embd=32, n_layer=2, n_head=2, vocab_size=64, n_positions=16, resid_pdrop=0.0,
            embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
        self.gpt = transformers.GPT2LMHeadModel(config)

    def forward(self, tokens, labels):
        out = self.gpt(input_ids=tokens, labels=labels, use_cache=False)
        return out.logits, out.loss


@pytest.mark.parametrize("pipelined", [False, True], ids=["one_ipu", "two_ipus"])
def test_gpt2_trains_like_the_cpu(pipelined):
    transformers = _transformers()
    torch.manual_seed(0)
    model = GPT2WithLoss(transformers)
    gpt = model.gpt
    assert gpt.lm_head.weight is gpt.transformer.wte.weight
    if pipelined:
        gpt.transformer.h[1] = poptorch.BeginBlock(gpt.transformer.h[1], ipu_id=1)
    accumulation = 4 if pipelined else 1
    reference = copy.deepcopy(model)
    opts = poptorch.Options()
    opts.Training.gradientAccumulation(accumulation)
    make = OPTIMIZERS["sgd_momentum"]
    trainer = poptorch.trainingModel(model, opts, make(model.parameters()))
    batches = [(t, t) for t, _ in token_batches(accumulation, vocab=64, length=8)]
    losses = [trainer(*inputs)[1] for inputs in batches]
    expected = reference_steps(reference, make(reference.parameters()), batches, accumulation)
    check_against_cpu(model, reference, losses, expected)
    assert gpt.lm_head.weight is gpt.transformer.wte.weight
    assert "gpt.lm_head.weight" not in trainer.getTensorNames()
    if pipelined:
        sent = [e for e in trainer.getTimeline().events[1]
                if e.kind == "copy" and e.micro_batch is None]
        assert [e.name for e in sent] == ["gpt.transformer.wte.weight (updated on IPU 0)"]
        return
    # inference of the trained model: the trainer's weights move to it implicitly
    tokens = batches[0][0][:MICRO_BATCH]
    logits, _ = poptorch.inferenceModel(model)(tokens, tokens)
    reference.eval()
    torch.testing.assert_close(logits, reference(tokens, tokens)[0], rtol=RTOL, atol=ATOL)
