"""Which training executor owns a user model's weights, and the hook that brings them home.

A `trainingModel` keeps its weights on the device and updates the host model lazily:
reading the model's parameters, state_dict or a parameter attribute (`model.fc.weight`)
first copies the trainer's newer weights to the host, and so does running an
`inferenceModel` of the same module. This table, user model -> its trainer (at most
one), is what those hooks read; it knows trainers only by the `Trainer` protocol, so it
imports no executor.
"""

from __future__ import annotations

import weakref
from typing import Protocol

import torch


class Trainer(Protocol):
    """What the registry needs of a training executor."""

    def copyWeightsToHostIfNeeded(self) -> bool:  # noqa: N802 - PopTorch's name
        ...

    def destroy(self) -> None:
        ...


# user model -> the training executor that owns its weights (at most one)
_TRAINERS: weakref.WeakKeyDictionary[torch.nn.Module, weakref.ref[Trainer]] = \
    weakref.WeakKeyDictionary()
# user model -> how many times a trainer wrote the device's weights into it (PopTorch's
# `_host_weights_version`): an inferenceModel of the model re-uploads when it changes
_HOST_VERSIONS: weakref.WeakKeyDictionary[torch.nn.Module, int] = weakref.WeakKeyDictionary()


def trainer_of(model: torch.nn.Module) -> Trainer | None:
    """The live training executor that owns `model`'s weights, or None."""
    trainer = _TRAINERS.get(model)
    return trainer() if trainer is not None else None


def sync_trainers_to_host(model: torch.nn.Module) -> None:
    """Copy a training executor's device weights into `model` if they are newer."""
    trainer = trainer_of(model)
    if trainer is not None:
        trainer.copyWeightsToHostIfNeeded()


def host_version(model: torch.nn.Module) -> int:
    """How many times a trainer wrote its device weights into `model`."""
    return _HOST_VERSIONS.get(model, 0)


def wrote_to_host(model: torch.nn.Module) -> None:
    """A trainer wrote its device weights into `model` (copyWeightsToHost)."""
    _HOST_VERSIONS[model] = host_version(model) + 1


class _SyncedModule:
    """Mixed into the wrapped model's class: reading its parameters or state first
    fetches the device's newer weights (PopTorch does the same)."""

    def named_parameters(self, *args, **kwargs):
        sync_trainers_to_host(self)
        return super().named_parameters(*args, **kwargs)

    def named_buffers(self, *args, **kwargs):
        sync_trainers_to_host(self)
        return super().named_buffers(*args, **kwargs)

    def state_dict(self, *args, **kwargs):
        sync_trainers_to_host(self)
        return super().state_dict(*args, **kwargs)

    def copyWeightsToHostIfNeeded(self) -> bool:  # noqa: N802 - PopTorch's wrapped model's
        """Copy the trainer's newer weights to this model; True if there were any."""
        trainer = trainer_of(self)
        return trainer.copyWeightsToHostIfNeeded() if trainer is not None else False

    def destroy(self) -> None:
        """Destroy the training model wrapping this model (PopTorch's wrapped model has
        it): release its IPUs and executable, after copying its weights here."""
        trainer = trainer_of(self)
        if trainer is not None:
            trainer.destroy()

    def __getattr__(self, name):
        # `model.W` or `model.layer.weight` after training (the spec's replica-grouping
        # example reads its weight so): parameters and submodules are nn.Module's
        # __getattr__, so plain attributes stay as fast as ever
        value = super().__getattr__(name)
        if isinstance(value, torch.Tensor | torch.nn.Module):  # buffers too
            sync_trainers_to_host(self)
        return value


_SYNCED_CLASSES: dict[type, type] = {}


def register(model: torch.nn.Module, trainer: Trainer) -> None:
    """Make `trainer` the owner of `model`'s weights and hook the model's reads."""
    cls = type(model)
    if not issubclass(cls, _SyncedModule):
        synced = _SYNCED_CLASSES.setdefault(cls, type(cls.__name__, (_SyncedModule, cls), {
            "__module__": cls.__module__, "__qualname__": cls.__qualname__}))
        model.__class__ = synced
    _TRAINERS[model] = weakref.ref(trainer)


def user_class(obj: object) -> type | None:
    """The user's own class of a model `register` hooked (its synced subclass is made
    here and is not importable), else None."""
    if isinstance(obj, _SyncedModule):
        return type(obj).__bases__[1]
    return None


def unregister(model: torch.nn.Module, trainer: Trainer) -> None:
    """Forget `trainer` as `model`'s owner (destroy()), if it still is."""
    if trainer_of(model) is trainer:
        del _TRAINERS[model]


def is_registered(model: torch.nn.Module) -> bool:
    """Whether the table has an entry for `model` (live or not)."""
    return model in _TRAINERS
