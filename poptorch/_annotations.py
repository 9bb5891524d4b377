"""Model annotations (spec 4.4.1): `Block` marks the code that forms one pipeline block.

Annotations are recorded with `torch.fx.traceback.annotate` as `ipu.*` entries of
`node.meta["custom"]`; capture carries them to MLIR locations and the
`ipu-import-annotations` pass turns them into op attributes. (The execution strategies
that consume them come with the multi-IPU issue.)
"""

from __future__ import annotations

import contextlib

import torch.fx.traceback as fxtb


class Block(contextlib.ContextDecorator):
    """Code run inside the block belongs to block `user_id`, placed on IPU `ipu_id`."""

    def __init__(self, user_id: str | None = None, ipu_id: int | None = None) -> None:
        self.user_id = user_id
        self.ipu_id = ipu_id
        self._context = None

    def __enter__(self) -> Block:
        entries = {}
        if self.user_id is not None:
            entries["ipu.block"] = str(self.user_id)
        if self.ipu_id is not None:
            entries["ipu.ipu_id"] = int(self.ipu_id)
        self._context = fxtb.annotate(entries)
        self._context.__enter__()
        return self

    def __exit__(self, *exc) -> bool:
        self._context.__exit__(*exc)
        return False
