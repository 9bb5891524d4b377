"""Float32 parameters meeting float16 inputs: converted to float16 (spec 4.7).

The spec's second way of running a model in half precision keeps the parameters in
float32, so that their updates happen in float32, while "the parameters will be
converted to float16 if you call an operation with a float16 input" (4-features.txt,
4.7, listing 4.20: an `nn.Linear` on a float16 input returns float16). PyTorch on the
CPU refuses `F.linear` of a float16 input and float32 weights; torch.export, whose
decompositions promote, would compute it in float32. `HalfParameters`, a
TorchFunctionMode active while poptorch captures a model (`capture.tracing_contexts`),
casts the float32 weight and bias of the layers that take them (linear, convolutions,
layer and group norm) to float16 when their input is float16: the cast is part of the
graph, so the gradient reaches the float32 parameter, which the optimizer updates in
float32. Other ops follow PyTorch's type promotion (a float16 and a float32 tensor
make float32), as the spec's last word says ("PopTorch complies with this convention").
"""

from __future__ import annotations

import torch
import torch.nn.functional as F  # noqa: N812 - PyTorch's own alias
from torch.overrides import TorchFunctionMode

# functions -> the names of their parameter arguments after the input (positional order)
_LAYERS = {
    F.linear: ("weight", "bias"),
    F.conv1d: ("weight", "bias"), F.conv2d: ("weight", "bias"), F.conv3d: ("weight", "bias"),
    F.conv_transpose1d: ("weight", "bias"), F.conv_transpose2d: ("weight", "bias"),
    F.conv_transpose3d: ("weight", "bias"),
    F.layer_norm: ("normalized_shape", "weight", "bias"),
    F.group_norm: ("num_groups", "weight", "bias"),
}


def _half(value):
    if isinstance(value, torch.Tensor) and value.dtype == torch.float32:
        return value.to(torch.float16)
    return value


class HalfParameters(TorchFunctionMode):
    """Casts a layer's float32 weight and bias to float16 when its input is float16."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        names = _LAYERS.get(func)
        if names is not None and args and isinstance(args[0], torch.Tensor) \
                and args[0].dtype == torch.float16:
            args = (args[0], *(_half(a) if names[i] in ("weight", "bias") else a
                               for i, a in enumerate(args[1:len(names) + 1])),
                    *args[len(names) + 1:])
            kwargs = {k: _half(v) if k in ("weight", "bias") else v for k, v in kwargs.items()}
        return func(*args, **kwargs)
