"""What every cost rule works with: `OpCost`, the `Plan` of one op over an IPU's tiles
(its result's layout, BSP steps, exchanges serialised under the available memory
proportion) and the vector rates of PopLibs' codelets (`VECTOR_RATES`, keyed by op class).

The formulas are in the `cost_families` module docstring.
"""

from __future__ import annotations

import functools
import logging
import math
from dataclasses import dataclass

from torch_mlir import ir

from poptorch.dialects import op_class
from poptorch.dialects.elementwise import BINARY_OPS, COMPARE_OPS, UNARY_OPS
from poptorch.runtime.machine.layout import pre_arranged
from poptorch.runtime.machine.system import (
    Machine,
    element_bits,
    element_type,
    spread,
    static_shape,
)

log = logging.getLogger("poptorch.machine")


@dataclass(frozen=True)
class OpCost:
    """The plan of one op on one IPU: cycles by kind and temporary bytes (whole IPU)."""

    compute: int = 0
    exchange: int = 0
    sync: int = 0
    temporary_bytes: int = 0

    @property
    def cycles(self) -> int:
        return self.compute + self.exchange + self.sync

    def __add__(self, other: OpCost) -> OpCost:
        """Ops in sequence: cycles add up; temporaries are freed between ops (peak)."""
        return OpCost(self.compute + other.compute, self.exchange + other.exchange,
                      self.sync + other.sync, max(self.temporary_bytes, other.temporary_bytes))


def _ops(**names: tuple[tuple[int, int], tuple[int, int]]) -> dict[type, tuple]:
    """{op class: rate} from the dialect's elementwise op names (a misspelt name fails at
    import)."""
    ops = {**UNARY_OPS, **BINARY_OPS, **COMPARE_OPS}
    return {ops[name]: rate for name, rate in names.items()}


# PopLibs' inner-loop cycle estimates of popops codelets (graphcore/poplibs,
# lib/popops/popopsCycleEstimators.hpp, unaryOpPerfInfo / binaryOpPerfInfo, an
# OpPerformanceInfo {cycles, naturalVectorWidth, unroll} each): op class -> ((cycles,
# elements) per loop for float, the same for half): `unroll` elements a loop, one
# natural vector (2 floats, 4 halves) when naturalVectorWidth, else one element.
# Integers run at the float rate. gelu is popops' GELU_ERF; gelu_tanh, popnn's GELU
# (the tanh approximation) at its vector loop cycles, getNonLinearityOpCycles(GELU,
# isFloat, isVector=true) in lib/popnn/PerformanceEstimation.hpp: 10 float, 5 half.
# Ops without an entry in either are charged as their nearest listed relative: log2 /
# log10 as LOGARITHM, acos / atan as ASIN, hyperbolic functions and their inverses as
# TANH, erfc as ERF, fmod as REMAINDER. Unlisted ops take one natural vector a cycle
# (ADD / SUBTRACT / MULTIPLY: {1, true}).
_EXP, _LOG, _TANH, _ERF, _ASIN = ((6, 2), (4, 4)), ((12, 2), (4, 4)), ((12, 2), (4, 4)), \
    ((41, 1), (13, 1)), ((102, 1), (102, 1))
_REM, _CMP = ((133, 2), (300, 4)), ((14, 4), (9, 4))
VECTOR_RATES: dict[type, tuple[tuple[int, int], tuple[int, int]]] = _ops(
    exp=_EXP, exp2=_EXP, expm1=((4, 1), (5, 4)),
    log=_LOG, log2=_LOG, log10=_LOG, log1p=((18, 2), (18, 4)),
    sqrt=((10, 2), (23, 4)), rsqrt=((8, 2), (19, 4)), reciprocal=((6, 2), (15, 4)),
    sin=((2300, 1), (25, 1)), cos=((2300, 1), (25, 1)), tan=((5100, 1), (5700, 1)),
    asin=_ASIN, acos=_ASIN, atan=_ASIN,
    tanh=_TANH, sinh=_TANH, cosh=_TANH, asinh=_TANH, acosh=_TANH,
    atanh=_TANH, sigmoid=((12, 2), (6, 4)),
    erf=_ERF, erfc=_ERF, gelu=((22, 1), (16, 1)), gelu_tanh=((10, 2), (5, 4)),
    # popnn's NonLinearityGrad vertex, getNonLinearityGradOpCycles (lib/popnn/
    # PerformanceEstimation.hpp) a vector: GELU_ERF 30 float / 15 half (placeholders
    # there, "until geluErf is coded in assembly"), GELU 10 / 5
    gelu_grad=((30, 2), (15, 4)), gelu_tanh_grad=((10, 2), (5, 4)),
    relu=((3, 2), (3, 4)), neg=((2, 2), (2, 4)), square=((2, 2), (2, 4)),
    abs=((1, 1), (1, 1)), floor=((2, 2), (2, 4)), ceil=((2, 2), (2, 4)),
    round=((2, 2), (2, 4)), trunc=((3, 2), (11, 4)), sign=((5, 2), (5, 4)),
    div=((10, 2), (21, 4)), pow=((312, 1), (325, 1)), remainder=_REM, fmod=_REM,
    atan2=((272, 2), (578, 4)), max=((3, 2), (4, 4)), min=((3, 2), (4, 4)),
    eq=_CMP, gt=_CMP, ge=_CMP, lt=_CMP, le=_CMP, ne=((20, 4), (11, 4)),
)


def vector_rate(kind: type | None, element: ir.Type, machine: Machine) -> tuple[int, int]:
    """(cycles, elements) of one inner loop of the elementwise op class `kind` (None, or
    a class without a PopLibs figure: one natural vector a cycle)."""
    if kind in VECTOR_RATES:
        single, half = VECTOR_RATES[kind]
        return half if element_bits(element) <= 16 and isinstance(element, ir.FloatType) \
            else single
    return 1, machine.vector_width(element)


def vector_cycles(elements: int, rate: tuple[int, int], machine: Machine) -> int:
    """Tile cycles for `elements` shared by the worker threads (`cost_families`)."""
    workers = machine.numWorkerContexts
    cycles, per_loop = rate
    return math.ceil(math.ceil(elements / workers) / per_loop) * cycles * workers


class Plan:
    """What every family reads: the op (and its class), the machine, tiles and the
    result's layout."""

    def __init__(self, op: ir.Operation, machine: Machine, tiles: int,
                 proportion: float) -> None:
        self.op, self.machine, self.proportion = op, machine, proportion
        self.op_class = op_class(op)  # the op's class in the ipu dialect
        self.available = tiles
        self.shapes = [static_shape(v, op) for v in op.operands]
        self.out_shapes = [static_shape(v, op) for v in op.results]
        main = op.results[0] if len(op.results) else op.operands[0]
        self.element = element_type(main)
        self.bytes = max(1, element_bits(self.element) // 8)
        self.out = math.prod(self.out_shapes[0] if self.out_shapes else self.shapes[0])
        self.tiles = spread(self.out, self.bytes, tiles)
        self.per_tile = math.ceil(self.out / self.tiles)  # result elements on a tile

    def bytes_of(self, index: int) -> int:
        """Bytes of one element of operand `index`."""
        return self.operand_bytes[index]

    @functools.cached_property
    def operand_bytes(self) -> tuple[int, ...]:
        return tuple(max(1, element_bits(element_type(v)) // 8) for v in self.op.operands)

    @functools.cached_property
    def arranged(self) -> tuple[bool, ...]:
        """Whether each operand is pre-arranged for this op (`layout.pre_arranged`)."""
        return tuple(pre_arranged(v) for v in self.op.operands)

    def step(self, compute: int, received: int = 0, steps: int = 1,
             temporary: int = 0) -> OpCost:
        """`steps` BSP steps; `received` bytes a tile takes in over all of them."""
        m = self.machine
        return OpCost(compute, math.ceil(received / m.exchangeBytesPerCycle),
                      steps * m.globalSyncCycles, temporary)

    def serialised(self, compute: int, received: int, max_pieces: int, tiles: int,
                   reduction: tuple[int, int] = (0, 0)) -> tuple[OpCost, int]:
        """A plan whose `received` temporary bytes a tile are capped at proportion x tile
        memory (`cost_families`), and its temporary bytes a tile. `reduction`: (bytes a
        tile receives, temporary bytes a tile) of an extra step summing partials."""
        m = self.machine
        cap = int(self.proportion * m.memoryBytesPerTile)
        pieces = 1 if received <= cap else max(1, max_pieces if cap == 0 else
                                               min(max_pieces, math.ceil(received / cap)))
        piece = math.ceil(received / pieces)
        extra_received, extra_temporary = reduction
        steps = pieces + (1 if extra_received else 0)
        temporary = piece + extra_temporary
        exchange = (pieces * math.ceil(piece / m.exchangeBytesPerCycle)
                    + math.ceil(extra_received / m.exchangeBytesPerCycle))
        return OpCost(compute, exchange, steps * m.globalSyncCycles, tiles * temporary), \
            temporary

    def choose(self, plans: list[tuple[OpCost, int]]) -> OpCost:
        """The fastest plan within the cap; if none fits, the one needing the least
        temporary memory a tile, with the spec's warning."""
        cap = int(self.proportion * self.machine.memoryBytesPerTile)
        fitting = [plan for plan in plans if plan[1] <= cap]
        if fitting:
            return min(fitting, key=lambda plan: plan[0].cycles)[0]
        cost, temporary = min(plans, key=lambda plan: (plan[1], plan[0].cycles))
        log.warning("%s needs %d bytes of temporary memory a tile, more than the %d "
                    "(available memory proportion %g) it may use",
                    self.op.name, temporary, cap, self.proportion)
        return cost
