"""The model's own code while poptorch captures it, as opposed to torch's and poptorch's.

- `library_file` tells which frames are the user's: an error names the innermost
  frame outside torch and poptorch (the model, or the library defining it, such as
  transformers). Which frames are "torch's" is `Options.sourceLocationExcludes`: a
  frame whose path contains one of its strings (default "/torch/", "/poptorch/") is
  skipped, as in PopTorch; poptorch's own packages always are (`excluding`).
- An exception the model's own code raises (its `raise ValueError(...)`, an `assert`, a
  `KeyError` from a dict input) reaches the user as it is, as when PopTorch traces
  forward in Python (`reraise_from_model`); what torch's export machinery raises
  becomes a poptorch.Error at the model's line (`capture_error`).
- A forward that changes the shape or strides of an input in place (`x.t_()`,
  `x.unsqueeze_(0)`, an `out=` tensor of another shape) is refused
  (`input_layouts_kept`): torch.export does not record such changes, and an input's
  in-place updates are written back into the user's tensor, whose shape stays.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import traceback
from typing import Any, NoReturn

import torch
from torch.utils import _pytree as pytree

from poptorch.errors import Error

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# poptorch and the packages mapped into it (dialects, passes, runtime), not the tests
OWN_DIRS = tuple(os.path.join(_ROOT, name) + os.sep
                 for name in ("poptorch", "dialects", "passes", "runtime"))


DEFAULT_EXCLUDES = ("/torch/", "/poptorch/")  # Options.source_location_excludes' default
_excludes: tuple[str, ...] | None = None  # Options.sourceLocationExcludes while compiling


@contextlib.contextmanager
def excluding(excludes: list[str] | tuple[str, ...]):
    """While inside (a model's compilation), frames whose path contains one of
    `excludes` (`Options.sourceLocationExcludes`) are not the user's."""
    global _excludes  # noqa: PLW0603 - one compilation at a time, as the capture state
    saved, _excludes = _excludes, tuple(excludes)
    try:
        yield
    finally:
        _excludes = saved


def library_file(path: str) -> bool:
    """Whether `path` is not the user's code: poptorch's own, or, outside a compilation,
    torch's; during one, a path containing one of `Options.sourceLocationExcludes`."""
    path = os.path.abspath(path)
    if path.startswith(OWN_DIRS):
        return True
    if _excludes is None:
        return path.startswith(_TORCH_DIR)
    return any(exclude in path for exclude in _excludes)


def user_line(node: torch.fx.Node | None) -> str:
    """`file:line` of the model's code that made `node` (the innermost frame of its
    stack trace outside torch and poptorch), or ""."""
    return _user_frame((node.stack_trace or "") if isinstance(node, torch.fx.Node) else "")


def running_user_line() -> str:
    """`file:line` of the model's code running now (while torch traces the model)."""
    return _user_frame("".join(traceback.format_stack()))


def _user_frame(trace: str) -> str:
    """The innermost `file:line` of a formatted stack `trace` outside torch and poptorch."""
    frames = re.findall(r'File "([^"]+)", line (\d+)', trace)
    user = [f"{name}:{line}" for name, line in frames if not library_file(name)]
    return user[-1] if user else ""


def raised_by_model(err: Exception) -> bool:
    """Whether the model's own code raised `err` (the innermost frame of its traceback
    is outside torch and poptorch, such as the user's `raise` or `assert`, or a library
    defining the model), not torch's export machinery."""
    frames = traceback.extract_tb(err.__traceback__)
    return bool(frames) and not frames[-1].filename.startswith("<") \
        and not library_file(frames[-1].filename)


def reraise_from_model(err: Exception, what: str) -> NoReturn:
    """Let an exception the model's code raised while poptorch captured `what` through,
    with its type and message, as calling forward on the CPU would (`except ValueError`
    works); a note names the line. Anything else: a poptorch.Error (`capture_error`)."""
    if isinstance(err, Error):  # without the notes torch's interpreter appends to it
        raise Error(err.message, type=err.type, location=err.location) from err
    if not raised_by_model(err):
        raise capture_error(err, what) from err
    frame = traceback.extract_tb(err.__traceback__)[-1]
    err.add_note(f"raised by the model at {frame.filename}:{frame.lineno} while poptorch "
                 f"captured {what}")
    raise err


def capture_error(err: Exception, what: str) -> Error:
    """A poptorch.Error for an exception torch raised while capturing the model, at the
    model's source line: the innermost frame of the traceback outside torch and poptorch
    (the user's model, or the library that defines it, such as transformers)."""
    frames = [f for f in traceback.extract_tb(err.__traceback__)
              if not f.filename.startswith("<")
              and not library_file(f.filename)]
    location = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    unknown = re.search(r"Found <class '([^']+)'> in output, which is not a known type",
                        str(err))
    if unknown:
        hint = (" (Hugging Face caches: transformers.integrations.executorch."
                "register_dynamic_cache_export_support(), or use_cache=False)"
                if unknown.group(1).startswith("transformers.") else "")
        reason = (f"the model returns a {unknown.group(1)}, which is not a tensor nor a "
                  "structure of tensors poptorch can take apart: register the type with "
                  f"torch.utils._pytree.register_pytree_node{hint}, or do not return it")
    data_dependent = ("_local_scalar_dense", "data-dependent", "Data-dependent",
                      "DataDependent")
    if not unknown and any(text in f"{type(err).__name__} {err}" for text in data_dependent):
        code = f" (`{frames[-1].line}`)" if frames and frames[-1].line else ""
        reason = (f"the model reads the value of a tensor in Python{code}, which makes its "
                  "control flow depend on the data; compute it with tensor operations "
                  "(torch.where, masks) or move it out of the model")
    return Error(f"could not capture {what}: {reason}", type="capture", location=location)


def input_names(module: torch.nn.Module, args: tuple, kwargs: dict) -> list[str]:
    """A name for each leaf of a forward call's flattened inputs (as `pytree.tree_flatten(
    (args, kwargs))` orders them): `x`, `x[0]`, `x['input']`."""
    try:
        params = [p.name for p in inspect.signature(module.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):  # no signature
        params = []
    names = []
    for (group, key, *rest), _ in pytree.tree_flatten_with_path((tuple(args), dict(kwargs)))[0]:
        if group.idx == 0:  # positional
            base = params[key.idx] if key.idx < len(params) else f"input {key.idx}"
        else:
            base = key.key
        names.append(base + pytree.keystr(tuple(rest)))
    return names


Layout = tuple[tuple[int, ...], tuple[int, ...]]  # a tensor's shape and strides


def layout(tensor: torch.Tensor) -> Layout:
    """`tensor`'s shape and strides."""
    return tuple(tensor.shape), tuple(tensor.stride())


def shape_change_error(name: str, before: Layout, after: Layout,
                       model: torch.nn.Module) -> Error:
    """The error for a forward of `model` that changed the shape and strides of its input
    `name` from `before` to `after`, at the forward's definition."""
    code = getattr(getattr(model.forward, "__func__", model.forward), "__code__", None)
    return Error(f"the model changes the shape or strides of its input '{name}' in place, "
                 f"from {list(before[0])} (strides {list(before[1])}) to {list(after[0])} "
                 f"(strides {list(after[1])}), as `t_()`, `unsqueeze_()`, `resize_()` or an "
                 "`out=` tensor of another shape do; an input keeps its shape on the IPU: "
                 "compute a new tensor instead (for example `x = x.t()`)", type="capture",
                 location=f"{code.co_filename}:{code.co_firstlineno}" if code else "")


@contextlib.contextmanager
def input_layouts_kept(model: torch.nn.Module):
    """While inside: a forward of `model` that changes the shape or strides of one of its
    input tensors in place is an Error (see the module)."""
    before: list[tuple[str, torch.Tensor, Layout]] = []

    def record(module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        leaves = pytree.tree_leaves((tuple(args), dict(kwargs)))
        before[:] = [(name, leaf, layout(leaf))
                     for name, leaf in zip(input_names(module, args, kwargs), leaves,
                                           strict=True) if isinstance(leaf, torch.Tensor)]

    def check(module: torch.nn.Module, *_: Any) -> None:
        for name, tensor, was in before:
            if layout(tensor) != was:
                raise shape_change_error(name, was, layout(tensor), module)

    hooks = [model.register_forward_pre_hook(record, with_kwargs=True, prepend=True),
             model.register_forward_hook(check, with_kwargs=True)]
    try:
        yield
    finally:
        for hook in hooks:
            hook.remove()
