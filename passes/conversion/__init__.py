"""The torch -> ipu conversion patterns, one module per op family (as torch-mlir's
TorchToLinalg): each exposes `populate_<family>(patterns)`, and the families that lower
aten ops torch-mlir has no op for (imported as opaque `torch.operator`s) an `OPERATORS`
table, which `ipu-convert-poptorch-ops` applies before torch-mlir's backend pipeline (as
it does `BEFORE_BACKEND`, the torch ops that pipeline decomposes wrongly)."""

from .common import Lowering, Patterns
from .convolution import OPERATORS as CONVOLUTION_OPERATORS
from .convolution import populate_convolution
from .convolution_backward import OPERATORS as CONVOLUTION_BACKWARD_OPERATORS
from .convolution_backward import populate_convolution_backward
from .creation import populate_creation
from .ctc import OPERATORS as CTC_OPERATORS
from .data_movement import populate_data_movement
from .elementwise import BEFORE_BACKEND as ELEMENTWISE_BEFORE_BACKEND
from .elementwise import populate_elementwise
from .grid_sample_backward import OPERATORS as GRID_SAMPLE_BACKWARD_OPERATORS
from .indexing import populate_indexing
from .linear import populate_linear
from .matmul_serialization import OPERATORS as MATMUL_SERIALIZATION_OPERATORS
from .normalization import populate_normalization
from .random import BEFORE_BACKEND as RANDOM_BEFORE_BACKEND
from .random import OPERATORS as RANDOM_OPERATORS
from .random import populate_random
from .reduction import OPERATORS as REDUCTION_OPERATORS
from .reduction import populate_reduction
from .slicing import OPERATORS as SLICING_OPERATORS

FAMILIES = (
    populate_convolution,
    populate_convolution_backward,
    populate_creation,
    populate_data_movement,
    populate_elementwise,
    populate_indexing,
    populate_linear,
    populate_random,
    populate_normalization,
    populate_reduction,
)


__all__ = ["BEFORE_BACKEND", "FAMILIES", "OPERATORS", "Patterns", "populate_all"]

# `torch.operator "<name>"` -> its lowering (the same `fn(op, b)` as a pattern's)
OPERATORS: dict[str, Lowering] = {**CONVOLUTION_OPERATORS, **CONVOLUTION_BACKWARD_OPERATORS,
                                  **GRID_SAMPLE_BACKWARD_OPERATORS, **REDUCTION_OPERATORS,
                                  **RANDOM_OPERATORS, **SLICING_OPERATORS,
                                  **MATMUL_SERIALIZATION_OPERATORS, **CTC_OPERATORS}
# torch ops lowered before torch-mlir's backend pipeline: torch op name -> lowering
BEFORE_BACKEND: dict[str, Lowering] = {**ELEMENTWISE_BEFORE_BACKEND, **RANDOM_BEFORE_BACKEND}


def populate_all(patterns: Patterns) -> None:
    """Register every family's lowerings."""
    for populate in FAMILIES:
        populate(patterns)
