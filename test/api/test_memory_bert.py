"""Memory figures of BERT-style training as Graphcore ran it: the optimizer state in its
own types, and the fitting verdict of a cut-down BERT-Large IPU-POD16 configuration
(bench/fidelity/configs/bert_large_pod16.py; the whole 24 layers take minutes)."""

import torch

import poptorch

F16, F32 = 2, 4


class Summed(torch.nn.Module):
    """Linear(64, 32) and its summed output, in fp32, as the loss."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(64, 32)

    def forward(self, x):
        return poptorch.identity_loss(self.fc(x).float().sum(), reduction="none")


def lamb_state(weight_dtype: torch.dtype, **accum) -> int:
    """The optimizer class of the memory estimate of LAMB on `Summed` in `weight_dtype`."""
    torch.manual_seed(0)
    model = Summed().to(weight_dtype)
    opt = poptorch.optim.LAMB(model.parameters(), lr=0.01, **accum)
    ipu = poptorch.trainingModel(model, poptorch.Options(), opt)
    ipu.compile(torch.rand(4, 64).to(weight_dtype))
    state = ipu.getMemoryEstimate().ipus[0].classes["optimizer"]
    ipu.destroy()
    return state


def test_lamb_state_of_half_weights_is_fp32():
    """LAMB's two moments are fp32 by default (first/second_order_momentum_accum_type),
    so an fp16 Linear(64, 32) keeps 2 x 4 bytes of state per parameter, not 2 x 2."""
    params = 64 * 32 + 32
    assert lamb_state(torch.float16) == 2 * F32 * params
    assert lamb_state(torch.float32) == 2 * F32 * params
    assert lamb_state(torch.float16, first_order_momentum_accum_type=torch.float16,
                      second_order_momentum_accum_type=torch.float16) == 2 * F16 * params
    assert lamb_state(torch.float16, first_order_momentum_accum_type=torch.float16) == \
        (F16 + F32) * params
