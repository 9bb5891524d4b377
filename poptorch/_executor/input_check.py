"""A call's inputs against those the program was compiled for (PopTorch's
`validateInputs`): arguments are matched by name (a keyword given by position, or the
other way round, is the same argument; an omitted argument is its default), dicts by key
(a dict whose keys come in another order runs), and what differs is an Error naming the
input (`x`, `batch['ids']`, `*args[1]`), what was expected and what was given, in
PyTorch's terms (torch.int64, torch.Size([2, 4])).
"""

from __future__ import annotations

import inspect
import sys
from collections import defaultdict
from typing import Any

import torch
from torch.utils import _pytree as pytree

from poptorch._frontend import arg_parsers
from poptorch._frontend.capture import given_dtype
from poptorch._frontend.model_code import library_file
from poptorch.errors import Error

_AGAIN = "wrap the model again to compile it for the new inputs"
_NO_DEFAULT = inspect.Parameter.empty


class Signature:
    """The names of a model's arguments, from its `forward`'s signature."""

    def __init__(self, model: torch.nn.Module) -> None:
        try:
            params = list(inspect.signature(model.forward).parameters.values())
        except (TypeError, ValueError):  # no signature (a builtin): name them by position
            params = [inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL)]
        kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        self.positional = [p.name for p in params if p.kind in kinds]
        self.variadic = next((p.name for p in params
                              if p.kind == inspect.Parameter.VAR_POSITIONAL), None)
        self.defaults = {p.name: p.default for p in params if p.default is not _NO_DEFAULT}

    def name(self, index: int) -> str:
        """The name of positional argument `index`."""
        if index < len(self.positional):
            return self.positional[index]
        if self.variadic is not None:
            return f"*{self.variadic}[{index - len(self.positional)}]"
        return f"argument {index}"


def _by_key(spec: pytree.TreeSpec) -> bool:
    """Dicts (and their subclasses but defaultdict) are matched by key."""
    return issubclass(spec.type, dict) and isinstance(spec.context, list) and \
        spec.type is not defaultdict


def _children(spec: pytree.TreeSpec, values: list[Any]) -> list[tuple[Any, pytree.TreeSpec,
                                                                        list[Any]]]:
    """(key, child spec, child values) of a node: keys for dicts, indices otherwise."""
    keys = spec.context if _by_key(spec) else range(len(spec.children()))
    result, offset = [], 0
    for key, child in zip(keys, spec.children(), strict=True):
        result.append((key, child, values[offset: offset + child.num_leaves]))
        offset += child.num_leaves
    return result


def _arguments(spec: pytree.TreeSpec, values: list[Any], names: Signature
               ) -> dict[str, tuple[pytree.TreeSpec, list[Any]]]:
    """name -> (spec, values) of each argument of a call's (args, kwargs)."""
    (_, args, args_values), (_, kwargs, kwargs_values) = _children(spec, values)
    result = {names.name(i): (s, v) for i, s, v in _children(args, args_values)}
    result.update({k: (s, v) for k, s, v in _children(kwargs, kwargs_values)})
    return result


def _kind(spec: pytree.TreeSpec) -> str:
    if spec.type.__name__ == "namedtuple":
        return spec.context.__name__
    if isinstance(spec.context, arg_parsers.Original):
        return repr(spec.context).removesuffix("(...)")
    return spec.type.__name__


def describe(value: Any) -> str:
    """A value as an error names it: a tensor by its shape and dtype."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)} and dtype {given_dtype(value)}"
    text = repr(value)
    return text if len(text) <= 60 else f"a {type(value).__name__}"


def _changed(path: str, what: str) -> Error:
    return Error(f"input {path} changed since compilation: {what}; {_AGAIN}", type="executor")


def _match(path: str, compiled: pytree.TreeSpec, given: pytree.TreeSpec, values: list[Any],
           out: list[tuple[str, Any]]) -> None:
    """Append to `out` the (path, value) of each leaf of the compiled structure, taken
    from `values`, the leaves of the given one."""
    if compiled.is_leaf():
        if not given.is_leaf():
            raise _changed(path, f"it was a single value and is a {_kind(given)} now")
        out.append((path, values[0]))
        return
    if given.is_leaf():
        raise _changed(path, f"it was a {_kind(compiled)} and is {describe(values[0])} now")
    if compiled.type is not given.type or (not _by_key(compiled)
                                           and compiled.context != given.context):
        raise _changed(path, f"it was a {_kind(compiled)} and is a {_kind(given)} now")
    if _by_key(compiled):
        if set(compiled.context) != set(given.context):
            raise _changed(path, _keys_changed(compiled.context, given.context))
        by_key = {key: (spec, vals) for key, spec, vals in _children(given, values)}
        for key, spec, _ in _children(compiled, values):
            _match(f"{path}[{key!r}]", spec, *by_key[key], out)
        return
    if len(compiled.children()) != len(given.children()):
        held = "tensors" if isinstance(compiled.context, arg_parsers.Original) else "elements"
        raise _changed(path, f"it was a {_kind(compiled)} of {len(compiled.children())} "
                             f"{held} and has {len(given.children())} now")
    for (index, spec, _), (_, child, vals) in zip(_children(compiled, values),
                                                  _children(given, values), strict=True):
        _match(f"{path}[{index}]", spec, child, vals, out)


def _keys_changed(compiled: list, given: list) -> str:
    missing = [k for k in compiled if k not in given]
    unexpected = [k for k in given if k not in compiled]
    parts = ([f"missing key(s) {', '.join(map(repr, missing))}"] if missing else []) + \
        ([f"unexpected key(s) {', '.join(map(repr, unexpected))}"] if unexpected else [])
    return f"its keys changed ({'; '.join(parts)})"


def match(flat: list[Any], spec: pytree.TreeSpec, in_spec: pytree.TreeSpec,
          in_constants: dict[int, Any], names: Signature) -> list[tuple[str, Any]]:
    """(name, value) of each leaf of the compiled inputs `in_spec`, in its order, taken
    from a call's `flat` inputs of structure `spec`."""
    dummy = [None] * in_spec.num_leaves
    compiled = _arguments(in_spec, dummy, names)
    given = _arguments(spec, flat, names)
    out: list[tuple[str, Any]] = []
    offset = 0
    for name, (c_spec, _) in compiled.items():
        if name in given:
            _match(name, c_spec, *given[name], out)
        elif (c_spec.is_leaf() and name in names.defaults and offset in in_constants
              and _same(in_constants[offset], names.defaults[name])):
            out.append((name, names.defaults[name]))  # given at compile time as its default
        else:
            raise Error(f"input {name} was given when the model was compiled and is "
                        f"missing now; {_AGAIN}", type="executor")
        offset += c_spec.num_leaves
    for name, (g_spec, values) in given.items():
        if name in compiled:
            continue
        if not (g_spec.is_leaf() and name in names.defaults
                and _same(values[0], names.defaults[name])):
            raise Error(f"input {name} was not given when the model was compiled (it was "
                        f"{_default(names, name)}) and is {_value(g_spec, values)} now; "
                        f"{_AGAIN}", type="executor")
    return out


def _default(names: Signature, name: str) -> str:
    return f"its default {names.defaults[name]!r}" if name in names.defaults else "absent"


def _value(spec: pytree.TreeSpec, values: list[Any]) -> str:
    return describe(values[0]) if spec.is_leaf() else f"a {_kind(spec)}"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return a is b
    return type(a) is type(b) and a == b


def user_dtypes(values: list[Any], in_constants: dict[int, Any],
                input_meta: list[tuple[tuple[int, ...], torch.dtype]]) -> list[torch.dtype]:
    """The dtype the user gave for each compiled tensor input, as far as `values` (the
    first checked call's) tell: torch.int64 for an input the device holds as int32."""
    tensors = [v for i, v in enumerate(values) if i not in in_constants]
    return [given_dtype(t) if isinstance(t, torch.Tensor) and t.dtype == dtype else dtype
            for t, (_, dtype) in zip(tensors, input_meta, strict=False)]


def check_values(values: list[Any], paths, in_constants: dict[int, Any],
                 input_meta: list[tuple[tuple[int, ...], torch.dtype]],
                 given_dtypes: list[torch.dtype], slices: int) -> None:
    """Each non-tensor value is the one the program was compiled for; each tensor has
    the compiled (full batch) shape and dtype: `input_meta` gives the micro-batch shapes
    and the dtypes on the device, `given_dtypes` the dtypes the user gave; `paths()`
    names the values (called for an error only)."""
    tensors = iter(zip(input_meta, given_dtypes, strict=True))
    for index, value in enumerate(values):
        if index in in_constants:
            expected = in_constants[index]
            if not _same(value, expected):
                raise Error(
                    f"input {paths()[index]} was {describe(expected)} when the model was "
                    f"compiled and is {describe(value)} now; non-tensor inputs are "
                    "constants of the compiled program: wrap the model again to run it "
                    "with another value",
                    type="executor")
            continue
        (shape, dtype), user_dtype = next(tensors)
        full = torch.Size((shape[0] * slices, *shape[1:]) if shape and slices > 1 else shape)
        if not isinstance(value, torch.Tensor):
            raise _changed(paths()[index], f"it was a tensor of shape {tuple(full)} and dtype "
                                 f"{user_dtype} and is {describe(value)} now")
        problems = []
        if value.shape != full:
            problems.append(f"shape mismatch, expected {full} but got {value.shape}")
        if value.dtype != dtype:
            problems.append(f"data type mismatch, expected {user_dtype} but got "
                            f"{given_dtype(value)}")
        if problems:
            raise _changed(paths()[index], "; ".join(problems))


# the leaves a call's inputs may have: tensors, and the values torch.export takes as
# constants of the program
_LEAVES = (torch.Tensor, bool, int, float, str, type(None), torch.dtype, torch.device)


def _call_site() -> str:
    """The user's `file:line` that called into poptorch (the innermost frame outside
    poptorch and torch), or ""."""
    frame = sys._getframe(1)
    while frame is not None:
        if not library_file(frame.f_code.co_filename):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return ""


def _takes(value: Any) -> bool:
    """Whether a model can take `value` as an input leaf: a tensor, a constant, or a
    module or function (a loss passed to forward, which the capture inlines)."""
    return isinstance(value, _LEAVES) or callable(value)


def check_call(model: torch.nn.Module, args: tuple, kwargs: dict, flat: list[Any],
               spec: pytree.TreeSpec) -> None:
    """The first call's inputs fit the model's forward (PyTorch's own rules for missing,
    extra and repeated arguments) and are tensors, values torch.export takes as
    constants, or modules and functions, inside tuples, lists and dicts: else an Error at
    the user's call."""
    try:
        signature = inspect.signature(model.forward)
    except (TypeError, ValueError):  # no signature (a builtin): torch.export will say
        signature = None
    if signature is not None:
        try:
            signature.bind(*args, **kwargs)
        except TypeError as err:
            raise Error(f"the model's forward{signature} cannot take the inputs given: {err}",
                        type="executor", location=_call_site()) from None
    if all(_takes(v) for v in flat):
        return
    for path, value in match(flat, spec, spec, {}, Signature(model)):
        if not _takes(value):
            kind = f"{type(value).__module__}.{type(value).__qualname__}".removeprefix(
                "builtins.")
            hint = ("torch.from_numpy() makes a tensor of it" if kind.startswith("numpy.")
                    else "register a poptorch.ICustomArgParser for its type to say which "
                         "tensors it holds")
            raise Error(f"input {path} has type {kind}; a model's inputs are tensors (or bool, "
                        f"int, float, str or None, which become constants of the program) "
                        f"in tuples, lists and dicts: {hint}",
                        type="executor", location=_call_site())
