"""torch -> ipu: the convolution family (being written)."""

from .common import Patterns


def populate_convolution(patterns: Patterns) -> None:
    """Register the convolution lowerings."""
