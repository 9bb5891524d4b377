"""The upsampling PopTorch refuses, refused at capture with its conditions.

PopTorch lowers `nearest` upsampling in 1, 2 and 3 dims, `bilinear` (its own
UpsampleBilinear2d op, one integer scaling factor) and `bicubic` with
align_corners=False (ONNX Resize), and refuses `linear` and `trilinear` ("Unsupported
upsample mode ...: currently only 'nearest' is supported"), bicubic with
align_corners=True ("Only support align_corners=False."), bilinear scale factors that
differ between the dims or are not integers ("Non-uniform bilinear upsampling not
supported", "Bilinear upsampling with non-integer factor not supported"), and has no
lowering for `nearest-exact` (poptorch/source/popart_canonicalization/ReshapeOps.cpp:
`upsampleHandler`, `upsampleBilinear2dHandler`, `unsupportedUpsampleHandler`).
torch's decompositions would compute them all, and in the training capture they run
before any table of ours sees the op, so the user's call itself is checked: a torch
function mode active while capturing sees `F.interpolate` (and `F.upsample*`, which
`nn.Upsample` and older code call) with the user's arguments.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import torch.nn.functional as F  # noqa: N812 - PyTorch's own alias
from torch.overrides import TorchFunctionMode

from poptorch.errors import Error

_SUPPORTED = ("only 'nearest' (1-d, 2-d and 3-d), 'area', 'bilinear' and 'bicubic' "
              "(2-d) upsampling is supported")
_REFUSED_MODES = {
    "linear": "for 1-d linear upsampling, add a dimension of size 1 (x.unsqueeze(2)) "
              "and use mode='bilinear'",
    "trilinear": "use mode='nearest'",
    "nearest-exact": "use mode='nearest'",
}
_INTERPOLATE = inspect.signature(F.interpolate)
# the functional forms -> the interpolate arguments they fix
_CALLS: dict[Callable, dict] = {
    F.interpolate: {}, F.upsample: {},
    F.upsample_bilinear: {"mode": "bilinear", "align_corners": True},
    F.upsample_nearest: {"mode": "nearest"},
}


def refusal(*args, **kwargs) -> str | None:
    """Why PopTorch refuses `F.interpolate(*args, **kwargs)`, or None."""
    call = _INTERPOLATE.bind(*args, **kwargs)
    call.apply_defaults()
    mode, scale = call.arguments["mode"], call.arguments["scale_factor"]
    if call.arguments["antialias"]:
        return None  # resampled by constant matrices (passes/conversion/convolution.py)
    if mode in _REFUSED_MODES:
        return (f"unsupported upsample mode '{mode}', as in PopTorch: {_SUPPORTED}; "
                f"{_REFUSED_MODES[mode]}")
    if mode == "bicubic" and call.arguments["align_corners"]:
        return ("bicubic upsampling with align_corners=True is not supported, as in "
                "PopTorch (\"Only support align_corners=False.\"): use align_corners=False")
    if mode != "bilinear" or scale is None or call.arguments["recompute_scale_factor"]:
        return None  # (bilinear from a size, or from a size torch recomputes: any)
    factors = [float(s) for s in scale] if isinstance(scale, list | tuple) else [float(scale)]
    if len(set(factors)) > 1:
        return (f"non-uniform bilinear upsampling (scale_factor={tuple(factors)}) is not "
                "supported, as in PopTorch: use one scale factor for both dims, or pass "
                "size= instead")
    if not factors[0].is_integer():
        return (f"bilinear upsampling with a non-integer scale_factor ({factors[0]}) is not "
                "supported, as in PopTorch: use an integer factor, or pass size= instead "
                "(or recompute_scale_factor=True)")
    return None


class RefuseUpsampling(TorchFunctionMode):
    """While capturing: a poptorch.Error at the user's line (`location()`) for the
    upsampling PopTorch refuses, before torch decomposes it."""

    def __init__(self, location: Callable[[], str]) -> None:
        super().__init__()
        self.location = location

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        fixed = _CALLS.get(func)
        if fixed is not None:
            arguments = _upsample_arguments(func, args, kwargs, fixed)
            reason = refusal(**arguments)
            if reason is not None:
                raise Error(reason, type="capture", location=self.location())
        return func(*args, **kwargs)


def _upsample_arguments(func: Callable, args: tuple, kwargs: dict, fixed: dict) -> dict:
    """The interpolate arguments of a call of `func` (one of `_CALLS`)."""
    bound = inspect.signature(func).bind(*args, **kwargs)
    return {**bound.arguments, **fixed}
