"""torch -> ipu: the indexing family (being written)."""

from .common import Patterns


def populate_indexing(patterns: Patterns) -> None:
    """Register the indexing lowerings."""
