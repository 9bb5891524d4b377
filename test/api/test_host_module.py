"""The host's program of a model that recomputes (`runtime/jit/host_module.py`): stages
inlined into one function, inter-IPU copies dropped, recomputed activations read from
the forward ops. For these models it computes the numbers the stage-by-stage program
computes, bit for bit, with less work, and the machine model still charges the stages,
copies and recomputation as the IPUs run them."""

import pytest
import torch

import poptorch
import poptorch.runtime.jit.program as jit_program


class Blocks(torch.nn.Module):
    """Three tanh layers over 2 IPUs (a recomputation checkpoint after the first), a
    dropout on IPU 0 when `dropout`, the MSE loss on IPU 1."""

    def __init__(self, dropout: bool = False):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range(3))
        self.dropout = dropout

    def forward(self, x, target):
        with poptorch.Block("A", ipu_id=0):
            x = poptorch.recomputationCheckpoint(torch.tanh(self.layers[0](x)))
            x = torch.tanh(self.layers[1](x))
            if self.dropout:
                x = torch.nn.functional.dropout(x, 0.5, self.training)
        with poptorch.Block("B", ipu_id=1):
            x = torch.tanh(self.layers[2](x))
            return x, torch.nn.functional.mse_loss(x, target)


def train(host: bool, monkeypatch, dropout: bool = False, replicas: int = 1,
          recompute: bool = True):
    """(the program, its timeline's cycles, the outputs, the trained weights) of two
    pipelined SGD steps, with the host's program or the stage-by-stage one."""
    with monkeypatch.context() as patch:
        if not host:
            patch.setattr(jit_program, "needs_host_module", lambda module, entry: False)
        torch.manual_seed(0)
        model = Blocks(dropout)
        opts = poptorch.Options().replicationFactor(replicas).randomSeed(7)
        opts.Training.gradientAccumulation(3)
        opts.setExecutionStrategy(poptorch.PipelinedExecution().useRecomputation(recompute))
        ipu = poptorch.trainingModel(model, opts,
                                     torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9))
        generator = torch.Generator().manual_seed(1)
        outputs = []
        for _ in range(2):
            x = torch.randn(12 * replicas, 16, generator=generator)
            target = torch.randn(12 * replicas, 16, generator=generator)
            outputs += [t.detach().clone() for t in ipu(x, target)]
        ipu.copyWeightsToHost()
        program = ipu._compiled.program
        return program, ipu.getTimeline().total_cycles, outputs, model.state_dict()


def assert_same_bits(host, stages):
    for mine, theirs in zip(host[2], stages[2], strict=True):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=0)
    for key, value in stages[3].items():
        torch.testing.assert_close(host[3][key], value, rtol=0, atol=0, msg=key)


@pytest.mark.parametrize("dropout", [False, True])
def test_recomputed_activations_come_from_the_forward_bit_for_bit(monkeypatch, dropout):
    host, stages = train(True, monkeypatch, dropout), train(False, monkeypatch, dropout)
    assert "def main_stage" in stages[0].source and "ipu_copy(" in stages[0].source
    assert "def main_stage" not in host[0].source and "ipu_copy(" not in host[0].source
    # forward 3, backward 5 (two weight and one input gradient on IPU 1, two on IPU 0);
    # the stage-by-stage program also recomputes the products of layers 0 and 1 on IPU 0
    assert host[0].source.count("= ipu_matmul(") == 8
    assert stages[0].source.count("= ipu_matmul(") == 10
    if dropout:  # the mask is drawn once, and once recomputed stage by stage
        assert host[0].source.count("ipu_random_uniform(") == 1
        assert stages[0].source.count("ipu_random_uniform(") == 2
    assert host[1] == stages[1]  # the machine model charges the recomputation still
    assert_same_bits(host, stages)


def test_replicated_pipeline_sums_gradients_as_stage_by_stage(monkeypatch):
    host, stages = train(True, monkeypatch, replicas=2), train(False, monkeypatch, replicas=2)
    assert host[1] == stages[1]
    assert_same_bits(host, stages)


def test_a_pipeline_that_recomputes_nothing_runs_stage_by_stage(monkeypatch):
    program = train(True, monkeypatch, recompute=False)[0]
    assert "def main_stage" in program.source and "ipu_copy(" in program.source
