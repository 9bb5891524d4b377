"""User input types (PopTorch's `ICustomArgParser`, `registerCustomArgParser`).

A parser says which tensors an object of a user type holds (`yieldTensors`, in a fixed
order) and how to build the object again around other tensors (`reconstruct`). Each
registered type becomes a node of torch's pytree, whose flatten and unflatten functions
call the parser registered now (so replacing a parser needs no new registration): the
capture, the micro-batch split and the checks of later calls then treat the object's
tensors like any other input's. The node's context is the object itself, which
`reconstruct` receives as the original structure, as PopTorch passes its compile-time
argument. An object of a subclass of a registered type uses its base's parser, as in
PopTorch: `register_subclasses` registers the subclass when such an object is an input.
"""

from __future__ import annotations

import abc
import copy
import functools
from typing import Any

from torch.utils import _pytree as pytree

from poptorch.errors import Error

# type -> its parser, as the user registered them
_PARSERS: dict[type, ICustomArgParser] = {}
# type -> torch's own pytree node for it (a dict subclass...), put back on removal
_REPLACED: dict[type, Any] = {}
# types registered as pytree nodes by this module (the user's, and their subclasses)
_NODES: set[type] = set()


class ICustomArgParser(abc.ABC):  # noqa: B024 - PopTorch's name; both methods abstract
    """Interface of a parser of a custom input type: extracts its tensors and rebuilds
    an object of the type around other tensors (PopTorch's interface)."""

    @abc.abstractmethod
    def yieldTensors(self, struct) -> Any:  # noqa: N802 - PopTorch's name
        """Yield every torch.Tensor `struct` holds, in a deterministic order."""

    @abc.abstractmethod
    def reconstruct(self, original_structure, tensor_iterator) -> Any:
        """An object like `original_structure` holding the tensors of `tensor_iterator`,
        taken in the order of `yieldTensors`."""


def parser_of(value: Any) -> ICustomArgParser | None:
    """The parser for `value`: its type's, else the first registered base class's."""
    parser = _PARSERS.get(type(value))
    if parser is not None:
        return parser
    return next((p for t, p in _PARSERS.items() if isinstance(value, t)), None)


class Original:
    """A pytree node's context: the object a parser took apart. Two are equal when
    their objects have the same type (the tensors' shapes are the leaves' business), so
    that a call's inputs match the compiled ones' structure without comparing the
    objects themselves (whose `==` may compare tensors)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Original) and type(other.value) is type(self.value)

    def __hash__(self) -> int:
        return hash(type(self.value))

    def __repr__(self) -> str:
        return f"{type(self.value).__name__}(...)"

    def __deepcopy__(self, memo: dict) -> Original:
        return self  # a snapshot already (torch.export deep-copies its specs)


def _flatten(value: Any) -> tuple[list[Any], Any]:
    parser = parser_of(value)
    if parser is None:
        raise Error(f"no argument parser is registered for {type(value).__name__}",
                    type="api")
    return list(parser.yieldTensors(value)), Original(_snapshot(value))


def _snapshot(value: Any) -> Any:
    """A shallow copy of `value`: the model may change the object it is given (set an
    attribute on it), which must not change the structure its tensors were taken from."""
    try:
        return copy.copy(value)
    except Exception:  # noqa: BLE001 - an object that cannot be copied is used as it is
        return value


def _flatten_with_keys(value: Any) -> tuple[list[tuple[Any, Any]], Any]:
    tensors, context = _flatten(value)
    return [(pytree.SequenceKey(i), t) for i, t in enumerate(tensors)], context


def _unflatten(values, context: Original) -> Any:
    context = context.value
    parser = parser_of(context)
    if parser is None:
        raise Error(f"no argument parser is registered for {type(context).__name__}",
                    type="api")
    iterator = iter(values)
    rebuilt = parser.reconstruct(context, iterator)
    if next(iterator, None) is not None:
        raise Error(f"the argument parser of {type(context).__name__} did not take every "
                    "tensor its yieldTensors gave back in reconstruct", type="api")
    return rebuilt


def _register_node(cls: type) -> None:
    if cls in _NODES:
        return
    if cls in pytree.SUPPORTED_NODES:  # torch's own handling (a dict subclass): ours wins
        _REPLACED[cls] = pytree.SUPPORTED_NODES[cls]
        _forget_node(cls)
    pytree.register_pytree_node(cls, _flatten, _unflatten,
                                flatten_with_keys_fn=_flatten_with_keys,
                                serialized_type_name=_serialized_name(cls))
    _NODES.add(cls)


def _serialized_name(cls: type) -> str:
    """A name for the type unique in the process (local classes share qualified names)."""
    return f"poptorch.custom_arg.{cls.__module__}.{cls.__qualname__}.{id(cls):x}"


def _forget_node(cls: type) -> None:
    """Deregister pytree node `cls` (torch's own function needs a serialized name)."""
    try:
        pytree._deregister_pytree_node(cls)
    except KeyError:
        pytree.SUPPORTED_NODES.pop(cls, None)
        pytree.SUPPORTED_SERIALIZED_TYPES.pop(cls, None)


def _deregister_node(cls: type) -> None:
    if cls not in _NODES:
        return
    _forget_node(cls)
    _NODES.discard(cls)
    previous = _REPLACED.pop(cls, None)
    if previous is not None:
        pytree._private_register_pytree_node(
            cls, previous.flatten_fn, previous.unflatten_fn,
            flatten_with_keys_fn=previous.flatten_with_keys_fn)


def registerCustomArgParser(arg_data_type: type,  # noqa: N802 - PopTorch's name
                            arg_parser: ICustomArgParser | None) -> None:
    """Register `arg_parser` for inputs of type `arg_data_type` (and its subclasses),
    replacing the type's parser if it had one; None removes the type's parser."""
    if not isinstance(arg_data_type, type):
        raise Error(f"registerCustomArgParser: arg_data_type must be a type, not "
                    f"{type(arg_data_type).__name__}", type="api")
    if arg_parser is None:
        _PARSERS.pop(arg_data_type, None)
        for cls in [c for c in _NODES if parser_of_type(c) is None]:
            _deregister_node(cls)
        return
    if not isinstance(arg_parser, ICustomArgParser):
        raise Error("arg_parser must inherit from ICustomArgParser", type="api")
    _PARSERS[arg_data_type] = arg_parser
    _register_node(arg_data_type)


def parser_of_type(cls: type) -> ICustomArgParser | None:
    """The parser objects of type `cls` use (`parser_of` for a type)."""
    return _PARSERS.get(cls) or next((p for t, p in _PARSERS.items() if issubclass(cls, t)),
                                     None)


def register_input_types(leaves: list[Any]) -> bool:
    """Make pytree nodes of the types of `leaves` PopTorch takes apart but torch's
    pytree does not know: subclasses of a type with a parser (its parser's), and dict
    subclasses (by key, as dicts); True if there was one (the inputs must then be
    flattened again)."""
    found = {type(leaf) for leaf in leaves if type(leaf) not in _NODES and
             (isinstance(leaf, dict) or _PARSERS and parser_of(leaf) is not None)}
    for cls in found:
        if parser_of_type(cls) is not None:
            _register_node(cls)
        elif cls not in pytree.SUPPORTED_NODES:
            pytree.register_pytree_node(
                cls, _dict_flatten, functools.partial(_dict_unflatten, cls),
                flatten_with_keys_fn=_dict_flatten_with_keys,
                serialized_type_name=_serialized_name(cls))
    return bool(found)


def _dict_flatten(value: dict) -> tuple[list[Any], list[Any]]:
    return list(value.values()), list(value.keys())


def _dict_flatten_with_keys(value: dict) -> tuple[list[tuple[Any, Any]], list[Any]]:
    return [(pytree.MappingKey(k), v) for k, v in value.items()], list(value.keys())


def _dict_unflatten(cls: type, values, keys: list[Any]) -> dict:
    result = cls()  # a dict subclass PopTorch rebuilds with type(x)(...): keys set here
    result.update(zip(keys, values, strict=True))
    return result


def is_custom(cls: type) -> bool:
    """True if objects of type `cls` are taken apart by a registered parser."""
    return cls in _NODES
