"""The torch -> ipu conversion patterns, one module per op family (as torch-mlir's
TorchToLinalg): each exposes `populate_<family>(patterns)`."""

from .common import Patterns
from .convolution import populate_convolution
from .convolution_backward import populate_convolution_backward
from .creation import populate_creation
from .data_movement import populate_data_movement
from .elementwise import populate_elementwise
from .indexing import populate_indexing
from .linear import populate_linear
from .reduction import populate_reduction

FAMILIES = (
    populate_convolution,
    populate_convolution_backward,
    populate_creation,
    populate_data_movement,
    populate_elementwise,
    populate_indexing,
    populate_linear,
    populate_reduction,
)


def populate_all(patterns: Patterns) -> None:
    """Register every family's lowerings."""
    for populate in FAMILIES:
        populate(patterns)
