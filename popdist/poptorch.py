"""popdist.poptorch: PopDist's `Options`, a poptorch.Options set up from the launcher
(poptorch.distributed.options)."""

from poptorch.distributed.options import Options

__all__ = ["Options"]
