"""The simulated IPU: one IPU's description, the presets, sizes of values and the tile
mapping of a tensor.

`Machine` describes one IPU with the parameter names of Poplar's `poplar::IPUModel`
(tilesPerIPU, memoryBytesPerTile, tileClockFrequency, exchangeBytesPerCycle,
memcpyBytesPerCycle, globalSyncCycles, ...) plus the figures Poplar keeps outside that
struct (AMP rates, IPU-Links and their ladder, host link, Streaming Memory, GW-Links).
Transfers: `external_sync_cycles` (a sync across IPUs), `copy_cycles` (an inter-IPU copy
over the links of its route), `ring_cycles` / `collective_cycles` (reduce-scatter,
all-gather, all-reduce over replicas), `host_cycles`, `streaming_cycles`. Presets: `GC200`
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

# A device's DMA read of DRAM across one PCIe link, for the hops of the host link and
# Streaming Memory that no Graphcore document times: the median of pcie-bench's 64-byte
# random reads from host DRAM, cache cold, by a PCIe Gen3 x8 device (Netronome NFP6000) on
# a Broadwell Xeon E5-2630 v4 server: 600 ns (600 to 640 ns on the other Xeon E5 servers,
# memory on the device's socket). Neugebauer et al., "Understanding PCIe performance for
# end host networking", SIGCOMM 2018; data: github.com/pcie-bench/data,
# nfp6000-1.2GHz_bdw-Xeon-E5-2630v4-dell-t430-s0-s0-s0/lat_dma_details.txt, LAT_DMA_RD Rand
# Cold 64, Med(ns). A Gen4 link and the IPU-Gateway's memory controller are not measured:
# that figure is this one's basis, not a measurement of the IPU.
PCIE_DMA_READ = 0.6e-6


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
    # The sync ending each BSP step on one IPU (Poplar's SyncType::INTERNAL; the IPU
    # model's name for the cycles of a sync): 90 cycles, what PopLibs' planners charge a
    # sync on one IPU ("We also sync prior to each exchange ... syncCycles = 90",
    # graphcore/poplibs lib/popnn/CTCLossPlan.cpp). Not poplibs' tools' IPU-model default
    # of 500, which is no hardware figure. Syncs across IPUs: `external_sync_cycles`.
    globalSyncCycles: int = 90
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
    # IPU-Links: 10 per GC200, 320 GB/s in all (GC200 / IPU-M2000 datasheet), so 32 GB/s
    # a link both ways, 16 GB/s a direction (128 Gbit/s, the link speed of poplibs' IPU
    # model: lib/poplibs_test/Util.cpp addGlobalExchangeConstraints), at the 0.85
    # efficiency that model gives a link.
    ipuLinks: int = 10
    ipuLinkBandwidth: float = 16e9  # one link, one direction
    ipuLinkEfficiency: float = 0.85
    # The IPUs form a ladder (poplibs' IPU model, as above): IPUs 2k and 2k+1 are a rung
    # joined by 4 links; IPU i and i +- 2 by 2 links (the rails). In an IPU-M2000 the four
    # IPUs are two rungs; the rails continue to the next IPU-M2000 over IPU-Link cables
    # (8 IPU-Link ports per IPU-M2000: 2 IPUs x 2 links up and down; IPU-POD DA build and
    # test guide) and close into a torus in an IPU-POD64 ("2D-torus IPU-Link topology",
    # IPU-POD64 datasheet).
    rungLinks: int = 4
    railLinks: int = 2
    # Latency of one hop of the ladder, for data and for the sync signal: 15 ns
    # (syncLatencyPerHop, poplibs lib/poplibs_test/Util.cpp setGlobalSyncLatency).
    ipuLinkHopLatency: float = 15e-9
    # IPUs sharing one host link and one IPU-Gateway: the 4 of an IPU-M2000.
    ipusPerHostLink: int = 4
    # Host link: the host reaches an IPU-M2000 through its IPU-Gateway over one 100 GbE
    # RoCEv2 NIC ("1x 100GbE RoCEv2 NIC card for host server connectivity", IPU-POD DA
    # build and test guide), 12.5 GB/s a direction, shared by its 4 IPUs; the gateway's
    # PCIe Gen4 link to the IPUs is faster. Latency, PCIe hops included (Graphcore
    # publishes no figure): 1.2 us = 0.6 + 0.6:
    # - host memory to the IPU-Gateway's memory, "sub-600ns" over ConnectX-5 RoCE
    #   (ConnectX-5 EN product brief). An RDMA latency is one way between the memories
    #   of two hosts, half a measured round trip (linux-rdma/perftest README: "The
    #   latency benchmarks measure round-trip time but report half of that as one-way
    #   latency"), so it holds the PCIe crossings at both NICs;
    # - the gateway's memory to the IPU over their PCIe link: one DMA read (PCIE_DMA_READ).
    hostLinkBandwidth: float = 12.5e9
    hostLinkLatency: float = 0.6e-6 + PCIE_DMA_READ
    # Streaming Memory (DRAM behind the IPU-Gateway, IPU-M2000 datasheet): Graphcore
    # publishes no per-IPU figure; 16 GB/s is a PCIe Gen4 x8 link, the IPU-to-gateway
    # link of the IPU-M2000 block diagram (IPU-M2000 BMC user guide). Latency: no
    # Graphcore figure either; a load is the IPU's DMA read of DRAM across that PCIe
    # link (PCIE_DMA_READ).
    streamingMemoryBandwidth: float = 16e9
    streamingMemoryLatency: float = PCIE_DMA_READ
    # GW-Links: 2 x 100 Gbps per IPU-Gateway (Bow-2000 datasheet, same IPU-Gateway as the
    # IPU-M2000), 25 GB/s a direction shared by the machine's 4 IPUs; they join IPU-POD64s
    # (IPU-POD128 datasheet: "optical GW-Link cables cross connected between" the racks).
    gwLinkBandwidth: float = 25e9
    ipusPerPod: int = 64

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

    def latency_cycles(self, seconds: float) -> int:
        return math.ceil(seconds * self.tileClockFrequency)

    def external_sync_cycles(self, ipus: int) -> int:
        """A sync across `ipus` IPUs (SyncType::EXTERNAL): each IPU's own sync, then the
        signal's round trip over one hop plus one per four IPUs (poplibs' count of hops
        for its IPU model, setGlobalSyncLatency), `ipuLinkHopLatency` a hop each way."""
        hops = 1 + ipus // 4
        return self.globalSyncCycles + self.latency_cycles(2 * hops * self.ipuLinkHopLatency)

    def link_route(self, src: int, dst: int) -> tuple[int, int]:
        """(hops, links of its narrowest hop) from IPU `src` to IPU `dst` on the ladder,
        routed as poplibs' IPU model routes: across the rung first if the other IPU is on
        the other side, then along the rails one rung a hop; within a rung, its links."""
        if src == dst:
            return 0, 0
        if src // 2 == dst // 2:
            return 1, self.rungLinks
        return (src % 2 != dst % 2) + abs(src // 2 - dst // 2), self.railLinks

    def copy_cycles(self, nbytes: int, src: int, dst: int, ipus: int = 2) -> int:
        """An inter-IPU copy from IPU `src` to `dst` in a program of `ipus` IPUs: the
        external sync before the exchange, the bytes over the links of the narrowest hop
        (one direction each, at the links' efficiency) and the latency of every hop."""
        hops, links = self.link_route(src, dst)
        if not hops:
            return 0
        bandwidth = links * self.ipuLinkBandwidth * self.ipuLinkEfficiency
        return (self.external_sync_cycles(max(ipus, src + 1, dst + 1))
                + self.transfer_cycles(nbytes, bandwidth)
                + self.latency_cycles(hops * self.ipuLinkHopLatency))

    def streaming_cycles(self, nbytes: int) -> int:
        """A load from or store to Streaming Memory: its latency plus bytes / bandwidth."""
        return (self.latency_cycles(self.streamingMemoryLatency)
                + self.transfer_cycles(nbytes, self.streamingMemoryBandwidth))

    def host_cycles(self, nbytes: int) -> int:
        """One transfer over the host link: its fixed latency plus bytes / bandwidth."""
        return (self.latency_cycles(self.hostLinkLatency)
                + self.transfer_cycles(nbytes, self.hostLinkBandwidth))

    def ring_cycles(self, nbytes: int, replicas: int, stride: int = 1, phases: int = 2) -> int:
        """`phases` ring phases over `replicas` IPUs `stride` apart (the IPUs running one
        stage in each replica of a `stride`-IPU model): a reduce-scatter (1) or an
        all-gather (1), or both, an all-reduce (2). A phase is R-1 steps, each moving
        nbytes / R over the ring's slowest link and ending in an external sync.

        The ring uses both directions of every link (half the data each way). The
        `stride` // 2 rings of one side of the ladder share its rails. Past an IPU-POD64
        the ring is hierarchical (as GCL's collectives across IPU-POD64s): the phase runs
        inside each pod over IPU-Links, and its 1/R_pod shards cross the pods over the
        GW-Links, shared by the 4 IPUs of an IPU-Gateway."""
        if replicas <= 1:
            return 0
        pods = max(1, math.ceil(replicas * stride / self.ipusPerPod))
        inside = max(1, replicas // pods)
        cycles = 0
        if inside > 1:
            if inside == 2 and stride == 1:
                links, share = self.rungLinks, 1  # a ring of one rung
            else:
                links, share = self.railLinks, max(1, stride // 2)
            bandwidth = 2 * links * self.ipuLinkBandwidth * self.ipuLinkEfficiency / share
            hops = max(1, self.link_route(0, stride)[0])
            step = (self.transfer_cycles(math.ceil(nbytes / inside), bandwidth)
                    + self.latency_cycles(hops * self.ipuLinkHopLatency)
                    + self.external_sync_cycles(min(replicas * stride, self.ipusPerPod)))
            cycles += phases * (inside - 1) * step
        if pods > 1:
            shard = math.ceil(nbytes / inside)
            bandwidth = self.gwLinkBandwidth / self.ipusPerHostLink
            step = (self.transfer_cycles(math.ceil(shard / pods), bandwidth)
                    + self.external_sync_cycles(replicas * stride))
            cycles += phases * (pods - 1) * step
        return cycles

    def collective_cycles(self, nbytes: int, replicas: int, stride: int = 1) -> int:
        """A ring all-reduce of `nbytes` per replica (`ring_cycles`, both phases)."""
        return self.ring_cycles(nbytes, replicas, stride, phases=2)


GC200 = Machine()

# The Mk1 Colossus GC2 (C2 card), "ipu1". 1216 tiles x 256 KiB = 304 MiB, 124.5 TFLOPS
# mixed precision and 31.1 TFLOPS FP32 (Jia et al., "Dissecting the Graphcore IPU
# Architecture via Microbenchmarking", arXiv:1912.03413, 2019). Clock: 124.5 TFLOPS /
# (2 x 1216 tiles x 32 MACs) = 1.6 GHz; FP32: 31.1 TFLOPS gives 8 MACs. 80 IPU-Links with
# 2.5 Tbps chip to chip = 312.5 GB/s, PCIe Gen4 x16 host link at 31.5 GB/s (Graphcore's
# C2 announcement, as reported by Silverton Consulting, 2018). Mk1 has no IPU-Gateway:
# remote buffers live in host memory, behind the host link. 8 TB/s IPU-Exchange /
# (1216 x 1.6 GHz) = 4.1 bytes per tile per cycle, as on Mk2. An IPU-Link: 128 Gibit/s a
# direction, the link poplibs' IPU model (which models the C2's ladder) uses. Two IPUs a
# card share its PCIe link; its latency is one DMA read of host memory across it
# (PCIE_DMA_READ), as is a remote buffer's.
GC2 = replace(
    GC200, IPUVersion="ipu1", version=1, tilesPerIPU=1216, memoryBytesPerTile=256 * 1024,
    tileClockFrequency=1.6e9, fp16AmpMacsPerCycle=32, fp32AmpMacsPerCycle=8, ipuLinks=80,
    ipuLinkBandwidth=128 * 2**30 / 8, hostLinkBandwidth=31.5e9, hostLinkLatency=PCIE_DMA_READ,
    ipusPerHostLink=2, streamingMemoryBandwidth=31.5e9)

# The Mk2 IPU with FP8 of the C600 PCIe card, "ipu21": 1472 cores, 900 MB, 560 TFLOPS
# FP8 and 280 TFLOPS FP16, 4 IPU-Links with 1 Tbps (125 GB/s) in total, PCIe Gen4 x16
# (Graphcore C600 datasheet, docs.graphcore.ai). Clock: 280 TFLOPS / (2 x 1472 x 64
# MACs) = 1.486 GHz; FP8: 560 TFLOPS gives 128 MACs. FP32: no published figure; the
# GC200's AMP ratio (a quarter of FP16) is kept. No IPU-Gateway: remote buffers live in
# host memory, behind the host link (one card, one IPU: 32 GB/s, PCIe Gen4 x16 one way;
# latency one DMA read across it, PCIE_DMA_READ, as for the GC2). A link: 125 GB/s / 4
# links / 2 directions.
GC200_FP8 = replace(
    GC200, IPUVersion="ipu21", version=21, tileClockFrequency=1.486e9,
    fp8AmpMacsPerCycle=128, ipuLinks=4, ipuLinkBandwidth=125e9 / 4 / 2, hostLinkBandwidth=32e9,
    hostLinkLatency=PCIE_DMA_READ, ipusPerHostLink=1, streamingMemoryBandwidth=32e9)

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
