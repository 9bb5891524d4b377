"""The Python model object of an executable file (`export_model=True`, spec 4.10.2).

The spec stores the user's model so that `poptorch.load` can re-create it: that needs
pickle, the one part of an executable file that can run code when read (the model's
classes are the user's). So:

- the pickle holds the object structure only: every tensor is a persistent reference to
  the file's safetensors weights (`dumps` returns them separately);
- only `poptorch.load` reads it, after the file's content hash matched, and its
  documentation says it trusts the file as `pickle.load` / `torch.load(weights_only=False)`
  would;
- and the unpickler still refuses what a model does not need: it imports nothing (a
  class must come from a module already imported), and it only rebuilds `nn.Module`
  subclasses, enums, torch dtypes and devices, standard containers and the copyreg
  helpers that instances pickle through. Anything else (functions, `os.system`,
  arbitrary classes) is a `poptorch.Error`.
"""

from __future__ import annotations

import builtins
import collections
import copyreg
import enum
import io
import pickle
import pickletools
import sys
from typing import Any

import torch

from poptorch._executor import trainers
from poptorch.errors import Error

_CONTAINERS = (collections.OrderedDict, collections.defaultdict, dict, list, set, frozenset,
               tuple, slice, complex, range, bytearray, torch.Size, torch.device)
# the optimizers poptorch runs, with their helper classes (VariableAttributes)
_OPTIMIZER_MODULES = ("poptorch.optim", *(f"torch.optim.{name}" for name in (
    "sgd", "adam", "adamw", "rmsprop", "optimizer")))
_HELPERS = (copyreg._reconstructor, copyreg.__newobj__, copyreg.__newobj_ex__,
            builtins.object)


class _Pickler(pickle.Pickler):
    """Pickles a model with its tensors as persistent references."""

    def __init__(self, file: io.BytesIO, names: dict[int, str]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.names = names  # id(tensor) -> state name, for the model's own tensors
        self.tensors: dict[str, torch.Tensor] = {}

    def persistent_id(self, obj: Any) -> Any:
        if not isinstance(obj, torch.Tensor):
            return None
        key = self.names.get(id(obj)) or f"extra.{id(obj)}"
        self.tensors[key] = obj.detach()
        return ("parameter" if isinstance(obj, torch.nn.Parameter) else "tensor", key,
                bool(obj.requires_grad))

    def reducer_override(self, obj: Any) -> Any:
        # trainingModel gives the user's model a synced subclass (`trainers.py`):
        # the file stores the user's own class.
        cls = trainers.user_class(obj)
        if cls is not None:
            return copyreg._reconstructor, (cls, object, None), obj.__getstate__()
        return NotImplemented


def dumps(objects: tuple[torch.nn.Module, Any]) -> tuple[bytes, dict[str, torch.Tensor]]:
    """The pickle of (model, optimizer or None) and the tensors they reference, by key
    (the model's state names where they have one)."""
    model = objects[0]
    names = {id(t): name for name, t in [
        *torch.nn.Module.named_parameters(model, remove_duplicate=False),
        *torch.nn.Module.named_buffers(model, remove_duplicate=False)]}
    buffer = io.BytesIO()
    pickler = _Pickler(buffer, names)
    try:
        pickler.dump(objects)
    except (pickle.PicklingError, TypeError, AttributeError) as err:
        raise Error(f"cannot export the model object: it is not picklable ({err}); pass "
                    "export_model=False and re-create and wrap the model before calling "
                    "loadExecutable", type="executable") from None
    return buffer.getvalue(), pickler.tensors


_MEMO_OPCODES = {"PUT", "BINPUT", "LONG_BINPUT", "GET", "BINGET", "LONG_BINGET"}


def _check_opcodes(data: bytes, path: str) -> None:
    """Walk the pickle's opcodes without running them (pickletools): a malformed stream,
    or a memo index beyond what the stream can have stored (the C unpickler sizes its
    memo by the largest index: one edited byte can ask for gigabytes), is refused."""
    try:
        ops = list(pickletools.genops(data))
    except Exception as err:  # noqa: BLE001 - whatever a malformed stream raises
        raise Error(f"{path}: the model object is not a valid pickle ({err})",
                    type="executable") from None
    for opcode, arg, _ in ops:
        if opcode.name in _MEMO_OPCODES and isinstance(arg, int) and arg > len(ops):
            raise Error(f"{path}: the model object's pickle refers to memo entry {arg} of "
                        f"a stream of {len(ops)} operations", type="executable")


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: bytes, tensors: dict[str, torch.Tensor], path: str) -> None:
        super().__init__(io.BytesIO(data))
        self.tensors, self.path = tensors, path
        self.loaded: dict[str, torch.Tensor] = {}  # tied weights stay one object

    def find_class(self, module: str, name: str) -> Any:
        if module not in sys.modules:
            raise Error(f"{self.path}: the model needs module {module!r}, which is not "
                        f"imported; import it before poptorch.load", type="executable")
        value: Any = sys.modules[module]
        for part in name.split("."):
            value = getattr(value, part, None)
        allowed = (
            value in _HELPERS or value in _CONTAINERS or isinstance(value, torch.dtype)
            or (isinstance(value, type)
                and (issubclass(value, torch.nn.Module | enum.Enum)
                     or module in _OPTIMIZER_MODULES)))
        if not allowed:
            raise Error(f"{self.path}: the model refers to {module}.{name}, which "
                        "poptorch.load does not restore (it rebuilds torch.nn.Module "
                        "objects, enums, dtypes and containers only); pass "
                        "export_model=False when exporting such a model",
                        type="executable")
        return value

    def persistent_load(self, pid: Any) -> Any:
        if not (isinstance(pid, tuple) and len(pid) == 3 and pid[1] in self.tensors):
            raise Error(f"{self.path}: the model refers to a tensor the file does not hold "
                        f"({pid!r})", type="executable")
        kind, key, requires_grad = pid
        if key not in self.loaded:
            tensor = self.tensors[key]
            if kind == "parameter":
                tensor = torch.nn.Parameter(tensor, bool(requires_grad))
            elif requires_grad and tensor.is_floating_point():
                tensor.requires_grad_(True)
            self.loaded[key] = tensor
        return self.loaded[key]


def loads(data: bytes, tensors: dict[str, torch.Tensor], path: str
          ) -> tuple[torch.nn.Module, Any]:
    """The (model, optimizer or None) pickled by `dumps`, with `tensors` (trusts the file:
    see the module docstring)."""
    _check_opcodes(data, path)
    try:
        restored = _Unpickler(data, tensors, path).load()
    except Error:
        raise
    except Exception as err:  # noqa: BLE001 - whatever a malformed pickle raises
        raise Error(f"{path}: the model object cannot be restored ({err!r})",
                    type="executable") from None
    if not (isinstance(restored, tuple) and len(restored) == 2
            and isinstance(restored[0], torch.nn.Module)
            and (restored[1] is None or isinstance(restored[1], torch.optim.Optimizer))):
        raise Error(f"{path}: the stored model is not a torch.nn.Module (and optimizer)",
                    type="executable")
    return restored
