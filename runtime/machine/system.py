"""The simulated IPU: one IPU's description, the presets, sizes of values and the tile
mapping of a tensor.

`Machine` describes one IPU with the parameter names of Poplar's `poplar::IPUModel`
(tilesPerIPU, memoryBytesPerTile, tileClockFrequency, exchangeBytesPerCycle,
memcpyBytesPerCycle, globalSyncCycles, ...) plus the figures Poplar keeps outside that
struct (AMP rates, IPU-Link, host-link and streaming-memory bandwidth). Presets: `GC200`
(Mk2, "ipu2", the default), `GC2` (Mk1, "ipu1") and `GC200_FP8` (the C600's Mk2 IPU with
FP8, "ipu21"); `machine_for(version)` picks one. Each figure names its public source.

The cost model of one op is `runtime/cost.py`; `spread` is the tile mapping both
it and the memory estimate use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from torch_mlir import ir

from poptorch.errors import Error


@dataclass(frozen=True)
class Machine:
    """One IPU of the machine model; field names follow Poplar's `poplar::IPUModel`.

    Defaults are the GC200 (Mk2) IPU. Bandwidths are in bytes per second, the clock in
    Hz, latencies in seconds, everything else per tile and per cycle.
    """

    # "ipu2" is Poplar's name of the Mk2 architecture (poplar::IPUModel::IPUVersion,
    # Poplar API reference, IPUModel.hpp); `version` is PopTorch's number for it
    # (Options.useOfflineIpuTarget: 1 Mk1, 2 Mk2, 21 Mk2 with FP8; spec 11.1).
    IPUVersion: str = "ipu2"
    version: int = 2
    # 1472 tiles (IPU-Cores) per GC200: Graphcore's GC200 / IPU-M2000 datasheet.
    tilesPerIPU: int = 1472
    # 6 hardware worker threads per tile (8832 threads per GC200): GC200 datasheet.
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
    # FP8: 0 means no FP8 AMP (FP8 operands run at the FP16 rate after conversion).
    fp16AmpMacsPerCycle: int = 64
    fp32AmpMacsPerCycle: int = 16
    fp8AmpMacsPerCycle: int = 0
    # fp16AmpMacsPerCycle is the rate of fp16 operands with fp16 partials: "1 petaFLOPS
    # FP16.16" per IPU-M2000 of 4 GC200s (IPU-M2000 datasheet). With fp32 partials
    # (FP16.32, PopLibs' default partialsType) the AMP runs half its conv units: 8
    # instead of 16 on Mk2 (graphcore/poplibs: lib/poplin/PerformanceEstimation.hpp
    # getConvPartialnx1WorkerCycles pairs hh16 with hf8 at the same 4-cycle inner
    # loop; popsparse's half-half AMP codelets use "2ampsets"), 8 units x 4 halves
    # (getConvUnitInputLoadElemsPerCycle) = 32 MACs. Mk1 has 8 units either way.
    fp16InFp32OutAmpMacsPerCycle: int = 32
    # 10 IPU-Links, 320 GB/s per IPU: GC200 / IPU-M2000 datasheet. An inter-IPU copy is
    # charged at this aggregate rate (optimistic: no M2000 link topology).
    ipuLinks: int = 10
    ipuLinkBandwidth: float = 320e9
    # Host link: PCIe Gen4 x16, 64 GB/s both ways (GC200 datasheet), 32 GB/s each way.
    hostLinkBandwidth: float = 32e9
    # Fixed cost of one host transfer (stream copy set-up and the PCIe round trip). An
    # assumption, not a published figure: 1 us, the order of one PCIe DMA round trip.
    hostLinkLatency: float = 1e-6
    # Streaming Memory (DRAM behind the IPU-Gateway, IPU-M2000 datasheet): Graphcore
    # publishes no per-IPU figure; 16 GB/s is a PCIe Gen4 x8 link, the IPU-to-gateway
    # link of the IPU-M2000 block diagram (IPU-M2000 BMC user guide). A bound to refine.
    streamingMemoryBandwidth: float = 16e9

    def compute_tiles(self, io_tiles: int = 0) -> int:
        """Tiles left for compute when `io_tiles` are reserved for I/O (numIOTiles)."""
        if not 0 <= io_tiles < self.tilesPerIPU:
            raise Error(f"io_tiles must be between 0 and {self.tilesPerIPU - 1} on a "
                        f"{self.tilesPerIPU}-tile IPU, got {io_tiles}", type="runtime")
        return self.tilesPerIPU - io_tiles

    def amp_macs_per_cycle(self, element: ir.Type) -> int:
        """AMP MACs per tile per cycle for operands of this element type."""
        if isinstance(element, ir.FloatType) and element.width == 8:
            return self.fp8AmpMacsPerCycle or self.fp16AmpMacsPerCycle
        if isinstance(element, ir.F16Type | ir.BF16Type):
            return self.fp16AmpMacsPerCycle
        return self.fp32AmpMacsPerCycle

    def vector_width(self, element: ir.Type) -> int:
        """Elements in one natural vector (the data path width) of this element type."""
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
        """One transfer over the host link: its fixed latency plus bytes / bandwidth."""
        latency = math.ceil(self.hostLinkLatency * self.tileClockFrequency)
        return latency + self.transfer_cycles(nbytes, self.hostLinkBandwidth)

    def collective_cycles(self, nbytes: int, replicas: int) -> int:
        """A ring all-reduce of `nbytes` per replica over `replicas` IPUs: a reduce-scatter
        and an all-gather, 2(R-1) steps each moving nbytes / R over IPU-Links and ending in
        a sync: 2(R-1)/R x nbytes / ipuLinkBandwidth + 2(R-1) x globalSyncCycles."""
        if replicas <= 1:
            return 0
        steps = 2 * (replicas - 1)
        moved = math.ceil(steps * nbytes / replicas)
        return self.link_cycles(moved) + steps * self.globalSyncCycles


GC200 = Machine()

# The Mk1 Colossus GC2 (C2 card), "ipu1". 1216 tiles x 256 KiB = 304 MiB, 124.5 TFLOPS
# mixed precision and 31.1 TFLOPS FP32 (Jia et al., "Dissecting the Graphcore IPU
# Architecture via Microbenchmarking", arXiv:1912.03413, 2019). Clock: 124.5 TFLOPS /
# (2 x 1216 tiles x 32 MACs) = 1.6 GHz; FP32: 31.1 TFLOPS gives 8 MACs. 80 IPU-Links with
# 2.5 Tbps chip to chip = 312.5 GB/s, PCIe Gen4 x16 host link at 31.5 GB/s (Graphcore's
# C2 announcement, as reported by Silverton Consulting, 2018). Mk1 has no IPU-Gateway:
# remote buffers live in host memory, behind the host link. 8 TB/s IPU-Exchange /
# (1216 x 1.6 GHz) = 4.1 bytes per tile per cycle, as on Mk2.
GC2 = replace(
    GC200, IPUVersion="ipu1", version=1, tilesPerIPU=1216, memoryBytesPerTile=256 * 1024,
    tileClockFrequency=1.6e9, fp16AmpMacsPerCycle=32, fp32AmpMacsPerCycle=8, ipuLinks=80,
    ipuLinkBandwidth=312.5e9, hostLinkBandwidth=31.5e9, streamingMemoryBandwidth=31.5e9)

# The Mk2 IPU with FP8 of the C600 PCIe card, "ipu21": 1472 cores, 900 MB, 560 TFLOPS
# FP8 and 280 TFLOPS FP16, 4 IPU-Links with 1 Tbps (125 GB/s) in total, PCIe Gen4 x16
# (Graphcore C600 datasheet, docs.graphcore.ai). Clock: 280 TFLOPS / (2 x 1472 x 64
# MACs) = 1.486 GHz; FP8: 560 TFLOPS gives 128 MACs. FP32: no published figure; the
# GC200's AMP ratio (a quarter of FP16) is kept. No IPU-Gateway: remote buffers live in
# host memory, behind the host link.
GC200_FP8 = replace(
    GC200, IPUVersion="ipu21", version=21, tileClockFrequency=1.486e9,
    fp8AmpMacsPerCycle=128, ipuLinks=4, ipuLinkBandwidth=125e9, streamingMemoryBandwidth=32e9)

MACHINES = {1: GC2, 2: GC200, 21: GC200_FP8}

# The simulated system: an IPU-POD64, 16 IPU-M2000s of 4 GC200s = 64 IPUs (Graphcore
# IPU-POD64 datasheet). poptorch.ipuHardwareIsAvailable(n) is true up to this many.
IPUS_IN_SYSTEM = 64

# Its devices as `gc-info -l` numbers them on a 64-IPU system: the single IPUs 0..63,
# then the multi-IPU devices of 2, 4, 8, 16, 32 and 64 IPUs, each size in IPU order
# (64..95 pairs, 96..111 fours, 112..119 eights, 120..123, 124..125, 126 all 64).
DEVICE_SIZES = tuple(1 << n for n in range(IPUS_IN_SYSTEM.bit_length()))
DEVICE_COUNT = sum(IPUS_IN_SYSTEM // size for size in DEVICE_SIZES)


def devices_of_size(ipus: int) -> range:
    """The device IDs of the devices with `ipus` IPUs (empty if there is none)."""
    first = 0
    for size in DEVICE_SIZES:
        count = IPUS_IN_SYSTEM // size
        if size == ipus:
            return range(first, first + count)
        first += count
    return range(0)


def device_ipus(device_id: int) -> range:
    """The IPUs of device `device_id` (0 <= device_id < DEVICE_COUNT)."""
    for size in DEVICE_SIZES:
        ids = devices_of_size(size)
        if device_id in ids:
            start = (device_id - ids.start) * size
            return range(start, start + size)
    raise Error(f"no device {device_id!r}: the simulated IPU-POD64 has devices 0 to "
                f"{DEVICE_COUNT - 1}", type="runtime")

# Default share of tile memory for temporaries (spec 4.6.9: "The default value is 0.6").
DEFAULT_AVAILABLE_MEMORY = 0.6


def machine_for(ipu_version: int) -> Machine:
    """The machine of `Options.useOfflineIpuTarget(ipu_version)`: 1, 2 or 21."""
    if isinstance(ipu_version, bool) or ipu_version not in MACHINES:
        raise Error(f"no IPU machine for ipu_version {ipu_version!r}; use 1 (Mk1 GC2), "
                    "2 (Mk2 GC200) or 21 (Mk2 with FP8, C600)", type="runtime")
    return MACHINES[ipu_version]


def element_bits(element: ir.Type) -> int:
    """Bits of one element (i1 counts as 8: booleans are stored as bytes)."""
    if isinstance(element, ir.IntegerType):
        return max(8, element.width)
    if isinstance(element, ir.FloatType):
        return element.width
    if isinstance(element, ir.IndexType):
        return 64
    raise TypeError(f"no size known for element type {element}")


def static_shape(value: ir.Value, op: ir.Operation) -> list[int]:
    """The shape of a tensor value ([] for a scalar); a dynamic shape is an Error."""
    if not isinstance(value.type, ir.ShapedType):
        return []
    tensor = ir.ShapedType(value.type)
    if not tensor.has_static_shape:
        raise Error(f"'{op.name}' has the dynamic shape {value.type}; the cost model needs "
                    "static shapes", type="runtime", location=str(op.location))
    return list(tensor.shape)


def element_type(value: ir.Value) -> ir.Type:
    vtype = value.type
    return ir.ShapedType(vtype).element_type if isinstance(vtype, ir.ShapedType) else vtype


def value_bytes(value: ir.Value) -> int:
    """Bytes of a statically shaped tensor (or scalar) value."""
    vtype = value.type
    if isinstance(vtype, ir.ShapedType):
        shaped = ir.ShapedType(vtype)
        return math.prod(shaped.shape) * element_bits(shaped.element_type) // 8
    return element_bits(vtype) // 8

def spread(elements: int, element_bytes: int, tiles: int) -> int:
    """Tiles a linearly mapped tensor occupies: at least 128 bytes a tile (poputil's
    calcLinearTileMapping, minBytesPerTile = 128, graphcore/poplibs)."""
    per_tile = math.ceil(128 / max(1, element_bytes))
    return max(1, min(tiles, math.ceil(elements / per_tile)))
