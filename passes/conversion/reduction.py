"""torch -> ipu: the reduction family (being written)."""

from .common import Patterns


def populate_reduction(patterns: Patterns) -> None:
    """Register the reduction lowerings."""
