"""Which samples test which op: every op of `supported_ops.md` (PopTorch 3.4's list) mapped
to where its samples come from, and the cases (op x form) built from them.

Sources, in order of preference:
- `opinfo:NAME` / `opinfo:NAME/VARIANT`: PyTorch's own sample inputs,
  `torch.testing._internal.common_methods_invocations.op_db` (OpInfo), all of an op's
  variants unless one is named;
- `module:CLASS`: PyTorch's module samples, `torch.testing._internal.common_modules`
  (ModuleInfo: constructor arguments x forward inputs, one sample per description);
- `hand:NAME`: samples written here (hand_samples.py), for what neither covers: random
  ops (drawn large enough to compare distributions), PopTorch's own ops, modules without
  a ModuleInfo;
- `absent:REASON`: an op that cannot be tested here, with the reason.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

import torch
from hand_samples import HAND
from parity import Case, Sample, same_distribution
from torch.utils import _pytree as pytree

SPEC = Path(__file__).with_name("supported_ops.md")

FORMS = ("float32", "float16", "int", "bool", "inplace", "out", "noncontiguous", "grad",
         "random")

# spec name -> sources, where the name alone does not find them (see `sources`)
OVERRIDES = {
    "tensor.index_fill_": ["opinfo:index_fill"],
    "torch.nn.RReLU": ["opinfo:nn.functional.rrelu"],
    "torch.nn.EmbeddingBag": ["opinfo:nn.functional.embedding_bag"],
    "torch.nn.TripletMarginLoss": ["opinfo:nn.functional.triplet_margin_loss"],
    "torch.nn.Upsample": ["opinfo:nn.functional.interpolate",
                          "opinfo:nn.functional.upsample_nearest",
                          "opinfo:nn.functional.upsample_bilinear"],
    "torch.nn.dropout": ["hand:dropout"],
    "torch.nn.functional.one_hot": ["opinfo:nn.functional.one_hot"],
    "torch.nn.functional.glu": ["opinfo:nn.functional.glu"],
    "torch_scatter.scatter": ["absent:torch-scatter 2.1.2 is an sdist with C++ extensions "
                              "and no wheel for torch 2.13 on PyPI"],
    "poptorch.cond": ["hand:cond"],
}
ABSENT_PACKAGES = {
    "torch_scatter": "torch-scatter 2.1.2 is an sdist with C++ extensions and no wheel for "
                     "torch 2.13 on PyPI",
    "torch_spline_conv": "torch-spline-conv has no wheel for torch 2.13 on PyPI",
}
# ops whose values are random: compared by distribution, no gradient
RANDOM = {"torch.bernoulli", "torch.distributions.Bernoulli", "torch.randn", "torch.normal",
          "torch.distributions.Normal", "torch.rand", "torch.uniform",
          "torch.distributions.Uniform", "torch.exponential", "torch.distributions.Exponential",
          "torch.randperm", "torch.nn.dropout",
          # OpInfo's rrelu samples train (random slopes), which PyTorch's own tests make
          # reproducible only by reseeding torch's generator around each call
          "torch.nn.RReLU"}


@functools.cache
def spec_ops() -> list[tuple[str, str]]:
    """(group, op) for every op of the spec's list, in its order."""
    ops, group = [], ""
    for line in SPEC.read_text().splitlines():
        if line.startswith("## "):
            group = re.sub(r" \(\d+\)$", "", line[3:])
        elif line.strip() and not line.startswith(("#", "<!--")):
            ops += [(group, name.strip()) for name in line.split(",")]
    return ops


@functools.cache
def _op_db() -> dict[str, list]:
    from torch.testing._internal.common_methods_invocations import (  # start-up cost
        op_db,
    )
    infos: dict[str, list] = {}
    for info in op_db:
        infos.setdefault(info.name, []).append(info)
    return infos


@functools.cache
def _module_db() -> dict[str, object]:
    from torch.testing._internal.common_modules import module_db  # start-up cost
    return {info.module_cls.__name__: info for info in module_db}


def sources(op: str) -> list[str]:
    """Where the samples of spec op `op` come from."""
    if op in OVERRIDES:
        return OVERRIDES[op]
    package = op.split(".")[0]
    if package in ABSENT_PACKAGES:
        return [f"absent:{ABSENT_PACKAGES[package]}"]
    short = op.rsplit(".", 1)[-1]
    if op in RANDOM or op.startswith("poptorch.") or short in HAND:
        return [f"hand:{short}"]
    if op.startswith("torch.nn.") and short in _module_db():
        return [f"module:{short}"]
    name = op.removeprefix("torch.").removeprefix("tensor.").removeprefix("Tensor.")
    for key in (name, short, f"nn.functional.{short}"):
        if key in _op_db():
            return [f"opinfo:{key}"]
    return ["absent:no samples found (add it to OVERRIDES or hand_samples.HAND)"]


def cases(op: str, forms=FORMS, cap: int = 8) -> list[Case]:
    """The cases of `op` in `forms`, at most `cap` samples each."""
    found = []
    for source in sources(op):
        kind, _, name = source.partition(":")
        if kind == "opinfo":
            found += _opinfo_cases(op, name, forms, cap)
        elif kind == "module":
            found += _module_cases(op, name, forms, cap)
        elif kind == "hand":
            form = "random" if op in RANDOM else "float32"
            if form in forms:
                samples = HAND[name]()[:cap]
                found.append(Case(op, source, form, samples,
                                  same_distribution if form == "random" else None))
            if "grad" in forms and op not in RANDOM and f"{name}.grad" in HAND:
                found.append(Case(op, source, "grad", HAND[f"{name}.grad"]()[:cap]))
    return [case for case in found if case.samples]


def describe(args: tuple, kwargs: dict) -> str:
    """A short label of a sample: tensor shapes and dtypes, other arguments as written."""
    def one(value):
        if isinstance(value, torch.Tensor):
            shape = "x".join(map(str, value.shape)) or "scalar"
            return f"{str(value.dtype).removeprefix('torch.')}[{shape}]"
        if isinstance(value, list | tuple):
            return "(" + ", ".join(one(v) for v in value) + ")"
        return repr(value)[:40]
    text = ", ".join([one(a) for a in args] + [f"{k}={one(v)}" for k, v in kwargs.items()])
    return text[:160]


def _bincount_as_poptorch(x, weights=None, minlength=0):
    """PopTorch's bincount: exactly `minlength` bins, larger values dropped (its
    RegisterMetaOps.cpp.inc: "the minimum length is also the maximum length")."""
    return torch.bincount(x, weights, minlength)[:minlength]


def _stable(fn):
    """`fn` (sort, argsort) with stable=True: PyTorch's CPU sort does not keep the order of
    equal elements (its docs say so), a stable sort does, as poptorch's does."""
    def stable(x, dim=-1, descending=False, stable=False):
        return fn(x, dim=dim, descending=descending, stable=True)
    return stable


def _stable_topk(x, k, dim=-1, largest=True, sorted=True):  # noqa: A002 - torch's name
    """torch.topk with ties in their input order (the CPU's topk orders them arbitrarily)."""
    order = torch.sort(x, dim=dim, descending=largest, stable=True).indices.narrow(dim, 0, k)
    return torch.return_types.topk((x.gather(dim, order), order))


# OpInfo name -> what the CPU runs instead of the op: where PopTorch defines it otherwise,
# or where PyTorch leaves a choice open (the order of ties)
REFERENCES = {"bincount": _bincount_as_poptorch, "sort": _stable(torch.sort),
              "argsort": _stable(torch.argsort), "topk": _stable_topk}

_DTYPE_FORMS = {"float32": [torch.float32], "float16": [torch.float16],
                "int": [torch.int64, torch.int32], "bool": [torch.bool]}


def _opinfo_cases(op: str, name: str, forms, cap: int) -> list[Case]:
    infos = _op_db()[name.split("/")[0]]
    if "/" in name:
        infos = [i for i in infos if i.variant_test_name == name.split("/")[1]]
    found = []
    for info in infos:
        source = f"opinfo:{info.name}" + (f"/{info.variant_test_name}"
                                          if info.variant_test_name else "")
        dtypes = info.supported_dtypes("cpu")
        if op in RANDOM:  # values compared by distribution, no gradient
            samples = _opinfo_samples(info, "float32", dtypes, cap) if "random" in forms else []
            if samples:
                found.append(Case(op, source, "random", samples, same_distribution))
            continue
        for form in forms:
            samples = _opinfo_samples(info, form, dtypes, cap)
            if samples:
                found.append(Case(op, source, form, samples))
    return found


def _opinfo_samples(info, form: str, dtypes, cap: int) -> list[Sample]:
    if form in _DTYPE_FORMS:
        dtype = next((d for d in _DTYPE_FORMS[form] if d in dtypes), None)
        if dtype is None:
            return []
        raw = _take(info.sample_inputs("cpu", dtype), cap)
        return [Sample(info.op, (s.input, *s.args), s.kwargs,
                       describe((s.input, *s.args), s.kwargs), REFERENCES.get(info.name))
                for s in raw]
    if form == "noncontiguous" and torch.float32 in dtypes:
        raw = _take(info.sample_inputs("cpu", torch.float32), cap)
        return [Sample(info.op, (n.input, *n.args), n.kwargs,
                       describe((n.input, *n.args), n.kwargs), REFERENCES.get(info.name))
                for n in (s.noncontiguous() for s in raw)]
    if form == "grad" and info.supports_autograd and torch.float32 in dtypes:
        raw = _take(info.sample_inputs("cpu", torch.float32, requires_grad=True), cap)
        return [Sample(info.op, (s.input, *s.args), s.kwargs,
                       describe((s.input, *s.args), s.kwargs), REFERENCES.get(info.name))
                for s in raw if any(t.requires_grad for t in _tensors(s))]
    if form == "inplace" and info.inplace_variant is not None and torch.float32 in dtypes:
        raw = _take((s for s in info.sample_inputs("cpu", torch.float32)
                     if isinstance(s.input, torch.Tensor) and not s.broadcasts_input), cap)
        return [Sample(info.inplace_variant, (s.input, *s.args), s.kwargs,
                       describe((s.input, *s.args), s.kwargs)) for s in raw]
    if form == "out" and info.supports_out and torch.float32 in dtypes:
        found = []
        for s in _take(info.sample_inputs("cpu", torch.float32), cap):
            try:
                expected = info.op(s.input, *s.args, **s.kwargs)
            except Exception:  # noqa: BLE001,S112 - a sample PyTorch itself refuses
                continue
            found.append(Sample(functools.partial(_with_out, info.op, _meta(expected)),
                                (s.input, *s.args), s.kwargs,
                                describe((s.input, *s.args), s.kwargs)))
        return found
    return []


def _take(samples, cap: int) -> list:
    taken = []
    for sample in samples:
        if len(taken) == cap:
            break
        taken.append(sample)
    return taken


def _tensors(sample) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves((sample.input, sample.args, sample.kwargs))
            if isinstance(t, torch.Tensor)]


@dataclass(frozen=True)
class _Meta:
    shape: tuple[int, ...]
    dtype: torch.dtype


def _meta(value):
    """The shapes and dtypes of an op's output (a tensor or a tuple of them)."""
    if isinstance(value, tuple):
        return tuple(_meta(v) for v in value)
    return _Meta(tuple(value.shape), value.dtype)


def _with_out(fn, meta, *args, **kwargs):
    """`fn(..., out=...)` into tensors made here, in forward: the `out=` form."""
    def empty(m):
        return tuple(empty(v) for v in m) if isinstance(m, tuple) else torch.empty(
            m.shape, dtype=m.dtype)
    return fn(*args, **kwargs, out=empty(meta))


def _module_cases(op: str, name: str, forms, cap: int) -> list[Case]:
    info = _module_db()[name]
    found = []
    for form in ("float32", "float16", "grad"):
        if form not in forms:
            continue
        dtype = torch.float16 if form == "float16" else torch.float32
        if dtype not in info.dtypes:
            continue
        train = form == "grad"
        inputs = info.module_inputs_func(info, device="cpu", dtype=dtype,
                                         requires_grad=train, training=train)
        samples = []
        for module_input in inputs:
            if module_input.forward_input is None:
                continue
            if len(samples) == cap:
                break
            ctor = module_input.constructor_input
            torch.manual_seed(0)
            module = info.module_cls(*ctor.args, **ctor.kwargs).to(dtype)
            forward = module_input.forward_input
            samples.append(Sample(module, forward.args, forward.kwargs, module_input.desc
                                  or describe(forward.args, forward.kwargs)))
        if samples:
            found.append(Case(op, f"module:{name}", form, samples))
    return found
