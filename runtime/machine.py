"""The simulated IPU and a first cost model: cycles of one ipu op from its FLOPs and bytes.

`Machine` describes one IPU of the machine model with the parameter names of Poplar's
`poplar::IPUModel` (tilesPerIPU, memoryBytesPerTile, tileClockFrequency,
exchangeBytesPerCycle, memcpyBytesPerCycle, globalSyncCycles, ...) plus the figures
Poplar keeps outside that struct (AMP rates, IPU-Link, host-link and streaming-memory
bandwidth). `GC200` is the default, the Mk2 IPU of the IPU-M2000. Each figure names its
public source next to it.

`op_cycles(op)` is deliberately simple: one BSP step per op, its work spread evenly
over all tiles, limited by arithmetic or by tile memory traffic, whichever is slower:

    cycles = max(ceil(work / (tilesPerIPU * rate)),
                 ceil(bytes / (tilesPerIPU * memcpyBytesPerCycle))) + globalSyncCycles

where `work` is multiply-accumulates at the AMP rate (`fp16AmpMacsPerCycle` /
`fp32AmpMacsPerCycle`) for matmuls and convolutions, and elements at the vector rate
(`dataPathWidth / element bits` lanes a cycle) for everything else; `bytes` is the
size of all operands and results. Views (`ipu.reshape`, `ipu.constant`), structure ops
(copies, host and streaming-memory transfers, collectives: charged where they happen,
by the timeline and the full cost model of issue 6) and non-ipu ops cost nothing here.
Issue 6 refines this: exchange per BSP step, AMP plans, available memory proportion,
transcendental ops, collectives and host I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from torch_mlir import ir

from poptorch.errors import Error


@dataclass(frozen=True)
class Machine:
    """One IPU of the machine model; field names follow Poplar's `poplar::IPUModel`.

    Defaults are the GC200 (Mk2) IPU. Bandwidths are in bytes per second, the clock in
    Hz, everything else per tile and per cycle.
    """

    # "ipu2" is Poplar's name of the Mk2 architecture (poplar::IPUModel::IPUVersion,
    # Poplar API reference, IPUModel.hpp).
    IPUVersion: str = "ipu2"
    # 1472 tiles (IPU-Cores) per GC200: Graphcore's GC200 / IPU-M2000 datasheet.
    tilesPerIPU: int = 1472
    # 6 hardware threads per tile (8832 threads per GC200): GC200 datasheet.
    numWorkerContexts: int = 6
    # 624 KiB of In-Processor-Memory per tile; 1472 x 624 KiB = 897 MiB, the "900MB"
    # of the GC200 datasheet.
    memoryBytesPerTile: int = 624 * 1024
    # 1.33 GHz: 250 TFLOPS FP16 (GC200 datasheet) = 1472 tiles x 64 MACs x 2 FLOPs x
    # 1.327 GHz; the figure DESIGN.md lists.
    tileClockFrequency: float = 1.33e9
    # 4 bytes per tile per cycle of internal exchange: the IPU model's default
    # ("ipu-exchange-bandwidth ... per tile in bytes", default 4) in graphcore/poplibs'
    # tools; cross-check: 8 TB/s IPU-Exchange (Graphcore) / (1472 tiles x 1.33 GHz)
    # = 4.1 bytes per tile per cycle.
    exchangeBytesPerCycle: int = 4
    # dataPathWidth / 8 bytes a cycle: poplibs' IPU model sets memcpyBytesPerCycle =
    # dataPathWidth / 8 (graphcore/poplibs tools).
    memcpyBytesPerCycle: int = 8
    # 64-bit load/store data path (poplibs' IPU model option dataPathWidth = 64; its
    # vector width is dataPathWidth / 32 floats, / 16 halves).
    dataPathWidth: int = 64
    # 500 cycles per global (BSP) sync: the value poplibs' tools give the IPU model
    # (DeviceInfo.globalSyncCycles = 500, graphcore/poplibs).
    globalSyncCycles: int = 500
    # AMP (accumulating matrix product) MACs per tile per cycle. FP16: 250 TFLOPS /
    # (2 x 1472 tiles x 1.33 GHz) = 64 (GC200 datasheet); FP32: 62.5 TFLOPS gives 16.
    fp16AmpMacsPerCycle: int = 64
    fp32AmpMacsPerCycle: int = 16
    # 10 IPU-Links, 320 GB/s per IPU: GC200 / IPU-M2000 datasheet. An inter-IPU copy is
    # charged at this aggregate rate (optimistic: issue 6 adds the M2000 link topology).
    ipuLinks: int = 10
    ipuLinkBandwidth: float = 320e9
    # Host link: PCIe Gen4 x16, 64 GB/s both ways (GC200 datasheet), 32 GB/s each way.
    hostLinkBandwidth: float = 32e9
    # Streaming Memory (DRAM behind the IPU-Gateway, IPU-M2000 datasheet): Graphcore
    # publishes no per-IPU figure; 16 GB/s is a PCIe Gen4 x8 link, the IPU-to-gateway
    # link of the IPU-M2000 block diagram (IPU-M2000 BMC user guide). A bound to refine.
    streamingMemoryBandwidth: float = 16e9

    def amp_macs_per_cycle(self, element: ir.Type) -> int:
        """AMP MACs per tile per cycle for operands of this element type."""
        if isinstance(element, ir.F16Type | ir.BF16Type):
            return self.fp16AmpMacsPerCycle
        return self.fp32AmpMacsPerCycle

    def vector_width(self, element: ir.Type) -> int:
        """Elements one tile processes per cycle at the vector rate."""
        return max(1, self.dataPathWidth // max(8, element_bits(element)))

    def transfer_cycles(self, nbytes: int, bandwidth: float) -> int:
        """Cycles to move `nbytes` at `bandwidth` bytes per second."""
        return math.ceil(nbytes * self.tileClockFrequency / bandwidth)

    def link_cycles(self, nbytes: int) -> int:
        """An inter-IPU copy over IPU-Links."""
        return self.transfer_cycles(nbytes, self.ipuLinkBandwidth)

    def streaming_cycles(self, nbytes: int) -> int:
        """A load from or store to Streaming Memory."""
        return self.transfer_cycles(nbytes, self.streamingMemoryBandwidth)

    def host_cycles(self, nbytes: int) -> int:
        """A transfer over the host link."""
        return self.transfer_cycles(nbytes, self.hostLinkBandwidth)


GC200 = Machine()


def element_bits(element: ir.Type) -> int:
    """Bits of one element (i1 counts as 8: booleans are stored as bytes)."""
    if isinstance(element, ir.IntegerType):
        return max(8, element.width)
    if isinstance(element, ir.FloatType):
        return element.width
    if isinstance(element, ir.IndexType):
        return 64
    raise TypeError(f"no size known for element type {element}")


def _static_shape(value: ir.Value, op: ir.Operation) -> list[int]:
    """The shape of a tensor value ([] for a scalar); a dynamic shape is an Error."""
    if not isinstance(value.type, ir.ShapedType):
        return []
    tensor = ir.ShapedType(value.type)
    if not tensor.has_static_shape:
        raise Error(f"'{op.name}' has the dynamic shape {value.type}; the cost model needs "
                    "static shapes", type="runtime", location=str(op.location))
    return list(tensor.shape)


def value_bytes(value: ir.Value) -> int:
    """Bytes of a statically shaped tensor (or scalar) value."""
    vtype = value.type
    if isinstance(vtype, ir.ShapedType):
        shaped = ir.ShapedType(vtype)
        return math.prod(shaped.shape) * element_bits(shaped.element_type) // 8
    return element_bits(vtype) // 8


def _matmul_macs(op: ir.Operation) -> int:
    """Every output element sums K products."""
    return math.prod(_static_shape(op.results[0], op)) * _static_shape(op.operands[0], op)[-1]


def _conv_macs(op: ir.Operation) -> int:
    """Every output element sums (C_in / groups) x kernel products."""
    weight = _static_shape(op.operands[1], op)
    return math.prod(_static_shape(op.results[0], op)) * math.prod(weight[1:])


def _conv_transpose_macs(op: ir.Operation) -> int:
    """Every input element scatters into (C_out / groups) x kernel outputs."""
    weight = _static_shape(op.operands[1], op)
    return math.prod(_static_shape(op.operands[0], op)) * math.prod(weight[1:])


def _conv_weight_grad_macs(op: ir.Operation) -> int:
    """Every weight gradient sums batch x output positions products."""
    grad = _static_shape(op.operands[1], op)
    return math.prod(_static_shape(op.results[0], op)) * grad[0] * math.prod(grad[2:])


# ipu ops that run on the AMP units: op name -> multiply-accumulates.
AMP_MACS: dict[str, Callable[[ir.Operation], int]] = {
    "ipu.matmul": _matmul_macs,
    "ipu.conv": _conv_macs,
    "ipu.conv_transpose": _conv_transpose_macs,
    "ipu.conv_weight_grad": _conv_weight_grad_macs,
}

# ipu ops this model does not charge: views, constants, and structure ops whose cost
# is a transfer or a collective (the timeline and issue 6 charge those).
FREE_OPS = frozenset({
    "ipu.reshape", "ipu.constant", "ipu.nop", "ipu.print", "ipu.copy", "ipu.host_load",
    "ipu.host_store", "ipu.remote_load", "ipu.remote_store", "ipu.all_reduce",
})


def op_cycles(op: ir.Operation | ir.OpView, machine: Machine = GC200) -> int:
    """Cycles of one ipu op on one IPU (see the module docstring for the formula)."""
    op = op.operation
    name = op.name
    if not name.startswith("ipu.") or name in FREE_OPS:
        return 0
    values = [*op.operands, *op.results]
    shapes = [_static_shape(v, op) for v in values]
    nbytes = sum(value_bytes(v) for v in values)
    element = ir.ShapedType(values[0].type).element_type if isinstance(
        values[0].type, ir.ShapedType) else values[0].type
    tiles = machine.tilesPerIPU
    if name in AMP_MACS:
        compute = math.ceil(AMP_MACS[name](op) / (tiles * machine.amp_macs_per_cycle(element)))
    else:
        elements = max(math.prod(shape) for shape in shapes)
        compute = math.ceil(elements / (tiles * machine.vector_width(element)))
    memory = math.ceil(nbytes / (tiles * machine.memcpyBytesPerCycle))
    return max(compute, memory) + machine.globalSyncCycles
