"""Model annotations (spec 4.4.1): Block, BeginBlock, BlockFunction, removeBlocks, NameScope.

Annotations are recorded during capture with `torch.fx.traceback.annotate` as `ipu.*`
entries of `node.meta["custom"]` (forward ops; the joint export copies them to the
backward ops); capture carries them to MLIR locations and `ipu-import-annotations`
turns them into op attributes: `ipu.block` (the user id), `ipu.ipu_id` and
`ipu.name_scope`. The execution strategies that consume them come with the multi-IPU
passes.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from typing import Any

import torch
import torch.fx.traceback as fxtb

from poptorch.errors import Error

_state = threading.local()


def _capture_state() -> dict[str, Any]:
    state = getattr(_state, "value", None)
    if state is None:
        state = _state.value = {"next_auto_id": 0, "begin": None,
                                "default": None, "scopes": [], "capturing": False}
    return state


@contextlib.contextmanager
def capture_scope(model: torch.nn.Module):
    """Reset block numbering for one capture; with BeginBlock, each run of the model's
    forward starts on IPU 0 (spec 4.4.1: layers before the first BeginBlock) and ends
    the block the last BeginBlock opened, so ops traced after the forward (the backward
    of a training graph) carry only what they copy from their forward ops."""
    _state.value = None
    state = _capture_state()
    state["capturing"] = True
    hooked = any(hasattr(m, "_poptorch_block") for m in model.modules())
    # each run of the forward numbers its id-less blocks from 0 (torch may trace it twice)
    renumber = model.register_forward_pre_hook(_reset_auto_id, prepend=True)
    try:
        with forward_hooks(model, _forward_starts, _forward_ends) if hooked \
                else contextlib.nullcontext():
            yield
    finally:
        renumber.remove()
        _forward_ends()
        _state.value = None


@contextlib.contextmanager
def forward_hooks(model: torch.nn.Module, before, after):
    """While inside: `before(module, args)` runs first of the forward pre-hooks of `model`,
    `after(module, args, output)` after its forward, even one that raised."""
    hooks = [model.register_forward_pre_hook(before, prepend=True),
             model.register_forward_hook(after, always_call=True)]
    try:
        yield
    finally:
        for hook in hooks:
            hook.remove()


def _forward_starts(*_) -> None:
    """Forward pre-hook of the captured model: the forward starts outside every
    BeginBlock block, on IPU 0 (torch traces a training model's forward more than once:
    a block left open by an earlier run must not claim these layers)."""
    state = _capture_state()
    _forward_ends()
    state["default"] = fxtb.annotate({"ipu.ipu_id": 0})
    state["default"].__enter__()


def _forward_ends(*_) -> None:
    """Forward hook of the captured model (and the end of the capture): close the block
    a BeginBlock left open, then the forward's default placement, innermost first."""
    state = _capture_state()
    for key in ("begin", "default"):
        if state.get(key) is not None:
            state[key].__exit__(None, None, None)
            state[key] = None


def _reset_auto_id(*_) -> None:
    """Forward pre-hook of the captured model (and Block.useAutoId): id-less blocks are
    numbered from "0" again."""
    _capture_state()["next_auto_id"] = 0


def _entries(user_id: str | None, ipu_id: int | str | None) -> dict[str, Any]:
    """The annotation of a block: as PopTorch's stage manager (`beginStage`), a block
    without a user_id gets the next automatic id, "0", "1", ... in the order the
    forward enters id-less blocks, so two id-less blocks are two blocks (and two
    stages with AutoStage.AutoIncrement, spec 11 AutoStage) even on the same IPU."""
    state = _capture_state()
    if user_id is None and state["capturing"]:
        user_id = str(state["next_auto_id"])
        state["next_auto_id"] += 1
    entries: dict[str, Any] = {}
    if user_id is not None:
        entries["ipu.block"] = str(user_id)
    if ipu_id is not None:
        entries["ipu.ipu_id"] = ipu_id
    return entries


MAX_IPU_ID = 65535  # the passes' bound on IPU ids (passes/registry.py MAX_ID)


def check_block(user_id: Any, ipu_id: Any, what: str = "Block") -> None:
    """A block's user_id is a str (or int) or None; its ipu_id an int from 0 to
    MAX_IPU_ID, a str of one, or None."""
    if user_id is not None and (isinstance(user_id, bool)
                                or not isinstance(user_id, str | int)):
        raise Error(f"{what}: user_id must be a str (or None), got {user_id!r}", type="api")
    number = ipu_id
    if isinstance(ipu_id, str) and ipu_id.strip().lstrip("-").isdigit():
        number = int(ipu_id)
    if number is not None and (isinstance(number, bool) or not isinstance(number, int)
                               or not 0 <= number <= MAX_IPU_ID):
        raise Error(f"{what}: ipu_id must be an int from 0 to {MAX_IPU_ID} (or None), got "
                    f"{ipu_id!r}", type="api")


class Block(contextlib.ContextDecorator):
    """Code run inside the block belongs to block `user_id`, placed on IPU `ipu_id`."""

    def __init__(self, user_id: str | None = None, ipu_id: int | str | None = None) -> None:
        check_block(user_id, ipu_id)
        self.user_id = user_id
        self.ipu_id = ipu_id
        self._context = None

    @staticmethod
    def useAutoId() -> None:  # noqa: N802 - PopTorch's name
        """Number blocks without a user_id from "0" again (called at the start of a
        forward); they always get the index of the block among such blocks."""
        _reset_auto_id()

    @staticmethod
    def start(user_id: str | None = None, ipu_id: int | str | None = None) -> None:
        """Start block `user_id` here, inside the forward: it lasts until the next
        Block.start or BeginBlock (PopTorch 3.x). Nothing on the CPU."""
        check_block(user_id, ipu_id, "Block.start")
        _start(user_id, ipu_id)

    def __enter__(self) -> Block:
        self._context = fxtb.annotate(_entries(self.user_id, self.ipu_id))
        self._context.__enter__()
        return self

    def __exit__(self, *exc) -> bool:
        self._context.__exit__(*exc)
        return False


def BlockFunction(user_id: str | None = None, ipu_id: int | str | None = None):  # noqa: N802
    """Decorate a function so that everything it runs is in the block (spec 4.4.1)."""

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with Block(user_id, ipu_id):
                return fn(*args, **kwargs)
        return wrapper

    return decorate


def _start(user_id: str | None, ipu_id: int | str | None) -> None:
    """The block starts here and lasts until the next BeginBlock or Block.start (or the
    end of the capture)."""
    state = _capture_state()
    if not state["capturing"]:
        return  # running on the CPU: blocks mean nothing there
    if state["begin"] is not None:
        state["begin"].__exit__(None, None, None)
    state["begin"] = fxtb.annotate(_entries(user_id, ipu_id))
    state["begin"].__enter__()


def _begin(module: torch.nn.Module, args) -> None:
    """Forward pre-hook of a BeginBlock module: the block starts here."""
    _start(*module._poptorch_block)


def BeginBlock(layer_to_call: torch.nn.Module, user_id: str | None = None,  # noqa: N802
               ipu_id: int | str | None = None) -> torch.nn.Module:
    """Start a block at `layer_to_call`: it and everything after it, until the next
    BeginBlock, is in the block. Returns the module (spec 4.4.1)."""
    if not isinstance(layer_to_call, torch.nn.Module):
        raise Error(f"BeginBlock needs a torch.nn.Module, got {type(layer_to_call).__name__}",
                    type="api")
    check_block(user_id, ipu_id, "BeginBlock")
    removeBlocks(layer_to_call, recurse=False)
    layer_to_call._poptorch_block = (user_id, ipu_id)
    layer_to_call._poptorch_block_hook = layer_to_call.register_forward_pre_hook(_begin)
    return layer_to_call


def begin_block_of(module: torch.nn.Module) -> tuple[str | None, int | str | None] | None:
    """The (user_id, ipu_id) of the BeginBlock at `module` itself, or None."""
    return getattr(module, "_poptorch_block", None)


def placeLayers(layers, layers_per_ipu) -> list[str]:  # noqa: N802 - PopTorch's style
    """Pipeline a stack of layers without editing the model (beyond PopTorch, as
    Graphcore's Hugging Face integration's `layers_per_ipu`): the first
    `layers_per_ipu[0]` layers run on IPU 0, the next `layers_per_ipu[1]` on IPU 1, and
    so on, with BeginBlock at the first layer of each IPU; what comes before the layers
    (embeddings) is on IPU 0, what comes after (a head) on the last IPU. Returns the
    block ids, `ipu<n>`, for a Stage or Phase.

        poptorch.placeLayers(model.bert.encoder.layer, [3, 7, 7, 7])
    """
    modules = list(layers) if not isinstance(layers, torch.nn.Module) or \
        isinstance(layers, torch.nn.ModuleList | torch.nn.Sequential) else None
    if modules is None or not all(isinstance(m, torch.nn.Module) for m in modules):
        raise Error(f"placeLayers needs a list of torch.nn.Modules (a ModuleList or "
                    f"Sequential), got {type(layers).__name__}", type="api")
    counts = list(layers_per_ipu) if isinstance(layers_per_ipu, list | tuple) else None
    if counts is None or not counts or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts):
        raise Error(f"placeLayers: layers_per_ipu must be a list of numbers of layers "
                    f"(integers >= 0), one per IPU, got {layers_per_ipu!r}", type="api")
    if sum(counts) != len(modules):
        raise Error(f"placeLayers: layers_per_ipu {counts} places {sum(counts)} layers, but "
                    f"there are {len(modules)}; make the numbers add up to {len(modules)}",
                    type="api")
    ids, first = [], 0
    for ipu, count in enumerate(counts):
        if count:
            BeginBlock(modules[first], f"ipu{ipu}", ipu_id=ipu)
            ids.append(f"ipu{ipu}")
        first += count
    return ids


def removeBlocks(module: torch.nn.Module, recurse: bool = True) -> None:  # noqa: N802
    """Remove BeginBlock annotations from `module` (and, by default, its sub-modules)."""
    for m in module.modules() if recurse else [module]:
        if hasattr(m, "_poptorch_block"):
            m._poptorch_block_hook.remove()
            del m._poptorch_block, m._poptorch_block_hook


class NameScope(contextlib.ContextDecorator):
    """Prefix the names of the ops created in the block with `name` (`ipu.name_scope`)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._context = None

    def __enter__(self) -> NameScope:
        scopes = _capture_state()["scopes"]
        scopes.append(self.name)
        self._context = fxtb.annotate({"ipu.name_scope": "/".join(scopes)})
        self._context.__enter__()
        return self

    def __exit__(self, *exc) -> bool:
        self._context.__exit__(*exc)
        _capture_state()["scopes"].pop()
        return False
