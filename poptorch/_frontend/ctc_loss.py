"""CTC loss in tensor ops, which the capture substitutes for `F.ctc_loss`.

torch has no decomposition of `aten._ctc_loss` (nor a fake kernel torch.export can
trace), so `nn.CTCLoss` cannot be captured as it is. PopTorch lowers it to PopART's
CTC loss with its limitations (docs/user_guide/experimental.rst): `reduction` 'sum' or
'mean', and `targets` 2-D (stacked and padded). Here a torch function mode active
while capturing computes it with the same limitations from ops the compiler has: the
forward (alpha) recursion of Graves et al. (2006) in log space, unrolled over the
input's T steps on the 2S+1 labels of the targets with blanks between them, where a
step past an input's length keeps its alphas. Unreachable states hold a large finite
negative number rather than -inf, so that the gradient autograd derives from it (as
PyTorch's own kernel's) has no NaN; a loss that large is an impossible alignment: inf,
or 0 with `zero_infinity`. PyTorch's gradient is the one with respect to the logits of
a log_softmax (its log_probs' exp() more than the true one): a term of value 0 and that
gradient is added.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import torch
import torch.nn.functional as F  # noqa: N812 - PyTorch's own alias
from torch.overrides import TorchFunctionMode

from poptorch.errors import Error


def ctc_loss(log_probs: torch.Tensor, targets: torch.Tensor, input_lengths, target_lengths,
             blank: int = 0, reduction: str = "mean", zero_infinity: bool = False
             ) -> torch.Tensor:
    """F.ctc_loss of (T, B, C) `log_probs` and (B, S) padded `targets`, reduced."""
    steps, batch, _ = log_probs.shape
    labels = 2 * targets.shape[1] + 1
    dtype = log_probs.dtype
    unreachable = torch.finfo(dtype).min / 4
    input_lengths = torch.as_tensor(input_lengths).to(torch.int64)
    target_lengths = torch.as_tensor(target_lengths).to(torch.int64)
    targets = targets.to(torch.int64)
    blanks = torch.full_like(targets, blank)
    # blank, target 0, blank, target 1, ..., blank
    extended = torch.cat([torch.stack([blanks, targets], 2).reshape(batch, labels - 1),
                          blanks[:, :1]], 1)
    emitted = log_probs.gather(2, extended.unsqueeze(0).expand(steps, batch, labels))
    # a label may follow the one two before it when it is not blank and differs from it
    repeated = torch.cat([torch.ones_like(extended[:, :2], dtype=torch.bool),
                          extended[:, 2:] == extended[:, :-2]], 1)
    skips = ~repeated & (extended != blank)
    floor = torch.full((batch, 2), unreachable, dtype=dtype)
    first = torch.arange(labels) < 2
    alpha = torch.where(first, emitted[0], floor[:, :1])
    for t in range(1, steps):
        one_back = torch.cat([floor[:, :1], alpha[:, :-1]], 1)
        two_back = torch.where(skips, torch.cat([floor, alpha[:, :-2]], 1), floor[:, :1])
        step = torch.logsumexp(torch.stack([alpha, one_back, two_back]), 0) + emitted[t]
        alpha = torch.where((t < input_lengths).unsqueeze(1), step, alpha)
    end = 2 * target_lengths
    last = alpha.gather(1, end.unsqueeze(1)).squeeze(1)
    before = alpha.gather(1, (end - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
    before = torch.where(target_lengths > 0, before, floor[:, 0])
    loss = -torch.logsumexp(torch.stack([last, before]), 0)
    # PyTorch's gradient (its ctc_loss_backward) is the one with respect to the logits
    # of a log_softmax: exp(log_probs) more than the true one, at the steps in length
    within = (torch.arange(steps).unsqueeze(1) < input_lengths).unsqueeze(2)
    softmax_term = torch.where(within, log_probs.exp(), 0).sum((0, 2))
    loss = loss + (softmax_term - softmax_term.detach())
    impossible = loss > -unreachable / 2
    loss = torch.where(impossible, torch.zeros_like(loss) if zero_infinity
                       else torch.full_like(loss, float("inf")), loss)
    if reduction == "sum":
        return loss.sum()
    return (loss / target_lengths.clamp(min=1).to(dtype)).mean()


_SIGNATURE = inspect.signature(ctc_loss)


def _refusal(log_probs, targets, reduction: str) -> str | None:
    """PopTorch's limitations of CTCLoss, or None."""
    if reduction not in ("sum", "mean"):
        return (f"CTCLoss with reduction='{reduction}' is not supported, as in PopTorch: "
                "use reduction='sum' or 'mean'")
    if targets.dim() != 2 or log_probs.dim() != 3:
        return ("CTCLoss needs batched (T, N, C) log_probs and 2-D (N, S) targets (stacked "
                f"and padded), as in PopTorch; got log_probs of {log_probs.dim()} dims and "
                f"targets of {targets.dim()}: pad the concatenated targets to (N, S)")
    return None


class CtcLossInTensorOps(TorchFunctionMode):
    """While capturing: `F.ctc_loss` (which nn.CTCLoss calls) as `ctc_loss`, or a
    poptorch.Error at the user's line (`location()`) where PopTorch refuses it."""

    def __init__(self, location: Callable[[], str]) -> None:
        super().__init__()
        self.location = location

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is not F.ctc_loss:
            return func(*args, **kwargs)
        call = _SIGNATURE.bind(*args, **kwargs)
        call.apply_defaults()
        arguments = call.arguments
        reason = _refusal(arguments["log_probs"], arguments["targets"], arguments["reduction"])
        if reason is not None:
            raise Error(reason, type="capture", location=self.location())
        return ctc_loss(**arguments)

