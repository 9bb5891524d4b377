"""The machine model's constants and their public sources, for FIDELITY.md's constant
table: every field of `runtime.machine.system.Machine` (its value on the three presets)
and the other figures the cost and memory rules use, each with where it comes from.

Values are read from the code when the table is made; only the sources are written
here, taken from the comments beside each constant. A `Machine` field without an entry
in `SOURCES` is listed as unsourced and makes `make fidelity` fail: a new constant
comes with its source.
"""

from __future__ import annotations

import dataclasses
import importlib

from poptorch.runtime.machine.system import GC2, GC200, GC200_FP8, Machine

PRESETS = (("GC200 (default)", GC200), ("GC2 (Mk1)", GC2), ("GC200 FP8 (C600)", GC200_FP8))

DATASHEET = "Graphcore GC200 / IPU-M2000 datasheet"
POPLIBS_MODEL = "graphcore/poplibs tools' IPU model defaults (DeviceInfo)"
PCIE = ("pcie-bench's median 64-byte DMA read of DRAM (cold, random) across PCIe Gen3 x8 on "
        "a Xeon E5-2630 v4 server, 600 ns (Neugebauer et al., \"Understanding PCIe "
        "performance for end host networking\", SIGCOMM 2018; github.com/pcie-bench/data, "
        "lat_dma_details.txt)")

# Machine field -> (unit, source of the GC200 value); the GC2 and C600 values: PRESET_SOURCES
SOURCES: dict[str, tuple[str, str]] = {
    "IPUVersion": ("", "Poplar API reference, IPUModel.hpp (poplar::IPUModel::IPUVersion)"),
    "version": ("", "PopTorch's Options.useOfflineIpuTarget numbering (spec 11.1)"),
    "tilesPerIPU": ("tiles", DATASHEET),
    "numWorkerContexts": ("threads/tile", f"{DATASHEET}: 8832 threads / 1472 tiles"),
    "memoryBytesPerTile": ("bytes", f"{DATASHEET}: 900 MB In-Processor-Memory / 1472 "
                           "tiles = 624 KiB"),
    "tileClockFrequency": ("Hz", f"{DATASHEET}: 250 TFLOPS fp16 = 1472 tiles x 64 MACs x "
                           "2 x 1.33 GHz"),
    "exchangeBytesPerCycle": ("bytes/tile/cycle", f"{POPLIBS_MODEL}, ipu-exchange-bandwidth "
                              "default 4; cross-check 8 TB/s IPU-Exchange / (1472 x 1.33 "
                              "GHz)"),
    "memcpyBytesPerCycle": ("bytes/cycle", f"{POPLIBS_MODEL}: dataPathWidth / 8"),
    "dataPathWidth": ("bits", f"{POPLIBS_MODEL}: dataPathWidth = 64"),
    "globalSyncCycles": ("cycles", "graphcore/poplibs lib/popnn/CTCLossPlan.cpp (\"syncCycles "
                         "= 90\"): a sync on one IPU (Poplar's SyncType::INTERNAL); not the "
                         "IPU model tools' default of 500, which is no hardware figure"),
    "fp16AmpMacsPerCycle": ("MACs/tile/cycle", "IPU-M2000 datasheet: 1 petaFLOPS FP16.16 per "
                            "4 GC200 = 250 TFLOPS / (2 x 1472 x 1.33 GHz); fp16 partials"),
    "fp32AmpMacsPerCycle": ("MACs/tile/cycle", f"{DATASHEET}: 62.5 TFLOPS fp32"),
    "fp8AmpMacsPerCycle": ("MACs/tile/cycle", "GC200 has no FP8 AMP (0: FP8 at the FP16 "
                           "rate)"),
    "fp16InFp32OutAmpMacsPerCycle": ("MACs/tile/cycle", "graphcore/poplibs "
                                     "lib/poplin/PerformanceEstimation.hpp: fp32 partials "
                                     "(PopLibs' default) run 8 conv units instead of 16 "
                                     "(hf8 vs hh16) x 4 halves a cycle"),
    "ipuLinks": ("links", f"{DATASHEET}: 10 IPU-Links"),
    "ipuLinkBandwidth": ("bytes/s", f"{DATASHEET}: 320 GB/s over 10 links = 16 GB/s a link a "
                         "direction; poplibs' IPU model link: 128 Gbit/s "
                         "(lib/poplibs_test/Util.cpp)"),
    "ipuLinkEfficiency": ("", "graphcore/poplibs lib/poplibs_test/Util.cpp "
                          "addGlobalExchangeConstraints (0.85 a link)"),
    "rungLinks": ("links", "graphcore/poplibs lib/poplibs_test/Util.cpp (ladder: 4 links a "
                  "rung); IPU-POD DA build and test guide (8 IPU-Link ports per IPU-M2000)"),
    "railLinks": ("links", "graphcore/poplibs lib/poplibs_test/Util.cpp (ladder: 2 links a "
                  "rail); IPU-POD64 datasheet (2D-torus IPU-Link topology)"),
    "ipuLinkHopLatency": ("s", "graphcore/poplibs lib/poplibs_test/Util.cpp "
                          "setGlobalSyncLatency (syncLatencyPerHop 15 ns)"),
    "ipusPerHostLink": ("IPUs", "IPU-M2000 datasheet: 4 GC200 behind one IPU-Gateway"),
    "hostLinkBandwidth": ("bytes/s", "IPU-POD DA build and test guide: 1x 100 GbE RoCEv2 NIC "
                          "per IPU-M2000, 12.5 GB/s a direction, shared by its 4 IPUs"),
    "hostLinkLatency": ("s", "no Graphcore figure; two legs, PCIe hops included: host to "
                        "IPU-M2000 over RoCE, ConnectX-5 EN product brief \"sub-600ns\" (one "
                        "way between two hosts' memories, half a round trip as "
                        "linux-rdma/perftest reports it), then the IPU-Gateway to the IPU, one "
                        "PCIe DMA read (system.PCIE_DMA_READ, 0.6 us)"),
    "streamingMemoryBandwidth": ("bytes/s", "no per-IPU figure published: 16 GB/s, a PCIe "
                                 "Gen4 x8 IPU-to-gateway link of the IPU-M2000 block "
                                 "diagram (IPU-M2000 BMC user guide); a bound to refine"),
    "streamingMemoryLatency": ("s", "no Graphcore figure: the IPU's DMA read of the "
                               "IPU-Gateway's DRAM across their PCIe link, "
                               "system.PCIE_DMA_READ"),
    "gwLinkBandwidth": ("bytes/s", "Bow-2000 datasheet (same IPU-Gateway as the IPU-M2000): "
                        "2 x 100 Gbps GW-Links, 25 GB/s a direction, shared by 4 IPUs"),
    "ipusPerPod": ("IPUs", "IPU-POD64 datasheet: 16 IPU-M2000s x 4 GC200; IPU-POD128 "
                   "datasheet: GW-Links join IPU-POD64s"),
}

PRESET_SOURCES = {
    "GC2 (Mk1)": "Jia et al., \"Dissecting the Graphcore IPU Architecture via "
                 "Microbenchmarking\", arXiv:1912.03413 (1216 tiles x 256 KiB, 124.5 TFLOPS "
                 "mixed, 31.1 TFLOPS fp32, clock 1.6 GHz derived); 80 IPU-Links, 2.5 Tbps and "
                 "PCIe Gen4 x16 31.5 GB/s: Graphcore's C2 announcement (Silverton "
                 "Consulting, 2018); an IPU-Link: 128 Gibit/s a direction, the link of "
                 "poplibs' IPU model (lib/poplibs_test/Util.cpp); 2 IPUs share a card's "
                 "PCIe link (ipusPerHostLink 2); host link latency one PCIe DMA read of "
                 "host memory (system.PCIE_DMA_READ)",
    "GC200 FP8 (C600)": "Graphcore C600 datasheet (docs.graphcore.ai): 1472 cores, 900 MB, "
                        "560 TFLOPS FP8, 280 TFLOPS FP16 (clock 1.486 GHz derived), 4 "
                        "IPU-Links 1 Tbps, PCIe Gen4 x16; fp32 AMP: the GC200's ratio kept "
                        "(no published figure); a link: 1 Tbps / 4 links / 2 directions; one IPU a "
                        "card, remote buffers in host memory behind PCIe Gen4 x16 (32 GB/s a "
                        "direction); host link latency one PCIe DMA read of host memory "
                        "(system.PCIE_DMA_READ)",
}

# Other constants of the cost and memory rules: (module under poptorch.runtime.machine,
# name, unit, source)
OTHERS: tuple[tuple[str, str, str, str], ...] = (
    ("system", "IPUS_IN_SYSTEM", "IPUs", "Graphcore IPU-POD64 datasheet: 16 IPU-M2000s x 4 "
     "GC200"),
    ("system", "DEFAULT_AVAILABLE_MEMORY", "", "PopTorch user guide 4.6.9: "
     "setAvailableMemoryProportion default 0.6"),
    ("system", "PCIE_DMA_READ", "s", PCIE + "; the basis of the PCIe hops no Graphcore "
     "document times, not a measurement of the IPU or its IPU-Gateway"),
    ("memory_estimate", "MIN_ELEMENTS_OFF_CHIP", "elements", "graphcore/popart "
     "sessionoptions.hpp, TensorLocationSettings default"),
    ("memory_estimate", "MIN_ELEMENTS_RTS", "elements", "graphcore/popart "
     "sessionoptions.hpp, TensorLocationSettings default"),
    ("op_memory", "VERTEX_FIELD_BYTES", "bytes", "no published figure: an assumption (a "
     "pointer and a count per vertex field, Poplar vertex programming guide)"),
    ("op_memory", "CONTROL_BYTES_PER_OP", "bytes", "no published figure: an assumption"),
    ("op_memory", "CODELET_BYTES", "bytes", "no published figure: an assumption"),
    ("cost_user", "HOST_CALL_LATENCY", "s", "no published figure: an assumption (a host "
     "sync plus a Python call, measured order on the development VM)"),
    ("plan", "VECTOR_RATES", "(cycles, elements) per inner loop, float and half",
     "graphcore/poplibs lib/popops/popopsCycleEstimators.hpp (unaryOpPerfInfo, "
     "binaryOpPerfInfo); ops without an entry there charged as their nearest listed "
     "relative (plan.py)"),
)


def _value(value: object) -> str:
    if isinstance(value, dict):
        return f"{len(value)} op classes"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"`{value}`"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:g}"


def machine_rows() -> tuple[list[str], list[str]]:
    """The Machine table's markdown lines and the names of fields without a source."""
    names = [name for name, _ in PRESETS]
    lines = [f"| constant | unit | {' | '.join(names)} | source (GC200) |",
             f"|---|---|{'---|' * len(names)}---|"]
    unsourced = []
    for field in dataclasses.fields(Machine):
        unit, source = SOURCES.get(field.name, ("", "**no source recorded**"))
        if field.name not in SOURCES:
            unsourced.append(field.name)
        values = " | ".join(_value(getattr(machine, field.name)) for _, machine in PRESETS)
        lines.append(f"| `{field.name}` | {unit} | {values} | {source} |")
    return lines, unsourced


def other_rows() -> tuple[list[str], list[str]]:
    """The other constants' markdown lines and the names no longer found in the code."""
    lines = ["| constant | value | unit | source |", "|---|---|---|---|"]
    missing = []
    for module, name, unit, source in OTHERS:
        found = importlib.import_module(f"poptorch.runtime.machine.{module}")
        if not hasattr(found, name):
            missing.append(f"{module}.{name}")
            continue
        lines.append(f"| `{module}.{name}` | {_value(getattr(found, name))} | {unit} | "
                     f"{source} |")
    return lines, missing


def table() -> tuple[str, list[str]]:
    """FIDELITY.md's constants section (markdown) and the problems that fail the run."""
    machine, unsourced = machine_rows()
    others, missing = other_rows()
    presets = [f"- {name}: {source}" for name, source in PRESET_SOURCES.items()]
    problems = [f"Machine.{name} has no source in bench/fidelity/constants.py SOURCES"
                for name in unsourced]
    problems += [f"{name} (constants.py OTHERS) is not in the code any more" for name in missing]
    text = "\n".join([*machine, "", "Sources of the other presets' values:", "", *presets, "",
                      "Other constants of the cost and memory rules:", "", *others])
    return text, problems
