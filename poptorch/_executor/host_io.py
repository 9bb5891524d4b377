"""Host I/O as the options shape it: overlapped streams (`set_overlap_for_input` /
`set_overlap_for_output`, read from @main's `ipu.overlap` argument and result
attributes) with PopTorch's checks of the options they need, and synthetic data
(`Options.enableSyntheticData`).

Overlapped I/O (PopTorch's `Compiler::verifySettingsForOverlappedIO`, in its order and
with its messages): not with PipelinedExecution (the default strategy, also on one IPU:
use ShardedExecution), only with IO tiles (`TensorLocations.numIOTiles`), and only with
output mode All or Sum.

Synthetic data (PopART's syntheticDataMode RandomNormal, which PopTorch's
`enableSyntheticData(True)` selects): nothing crosses the host link. Each input the
program reads is drawn on the device from a standard normal distribution (in the
input's dtype, seeded by the model's random seed; integer and boolean inputs, which
PopART's normal draws do not cover, are zeros, so that indices and labels stay valid),
and no output is
streamed back: the host's output tensors keep the contents they were allocated with,
which here are zeros (PopTorch's are uninitialised memory). Weights are uploaded and
read back as usual, so a training model still trains, on the random data. The timeline
has no host transfers and the host-IPU and IPU-host latencies are 0.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from torch_mlir import ir

from poptorch import profiling
from poptorch._executor import batches, input_updates
from poptorch._frontend import capture
from poptorch.dialects.placement import symbol_table
from poptorch.enums import OutputMode
from poptorch.errors import Error
from poptorch.options import Options
from poptorch.options.strategies import PipelinedExecution
from poptorch.runtime.machine.timeline import HostStreams

OVERLAP = "ipu.overlap"


def _modes(function: ir.Operation, key: str) -> dict[int, str]:
    """Argument or result index -> its `ipu.overlap` mode."""
    if key not in function.attributes:
        return {}
    modes = {}
    for index, entry in enumerate(ir.ArrayAttr(function.attributes[key])):
        entry = ir.DictAttr(entry)
        if OVERLAP in entry:
            modes[index] = ir.StringAttr(entry[OVERLAP]).value
    return modes


def overlapped(module: ir.Module, streams: HostStreams, options: Options,
               training: bool) -> HostStreams:
    """`streams` with the overlap modes @main's attributes give its streams, after
    PopTorch's checks of the options; synthetic data: no streams at all."""
    if options.synthetic_data:
        return HostStreams()
    main = symbol_table(module.operation)["main"]
    inputs, outputs = _modes(main, "arg_attrs"), _modes(main, "res_attrs")
    marked = {name: inputs[i] for i, name in streams.inputs if i in inputs}
    marked |= {name: outputs[i] for i, name in streams.outputs if i in outputs}
    if marked:
        check_options(options, training, sorted(marked))
    return HostStreams(streams.inputs, streams.outputs, marked)


def check_options(options: Options, training: bool, names: list[str]) -> None:
    """PopTorch's checks of overlapped I/O; `names`: the overlapped streams."""
    what = f"(set_overlap_for_input/output marks {', '.join(names)})"
    strategy = options.execution_strategy
    if strategy is None or isinstance(strategy, PipelinedExecution):
        raise Error("Overlapped IO is not supported with poptorch.PipelinedExecution. If you "
                    "are using only one IPU, please switch to poptorch.ShardedExecution. "
                    + what, type="options")
    if not options.TensorLocations.num_io_tiles:
        raise Error("No IO tiles allocated. You must allocate at least 32 IO tiles using "
                    f"poptorch.Options().TensorLocations.numIOTiles. {what}", type="options")
    mode = options.output_mode
    if mode == OutputMode.Default:
        mode = OutputMode.Final if training else OutputMode.All
    if mode not in (OutputMode.All, OutputMode.Sum):
        raise Error("Unsupported output mode for overlapped IO. Please switch output mode "
                    f"to poptorch.OutputMode.All or poptorch.OutputMode.Sum. {what} (the "
                    f"output mode is {mode.name})", type="options")


def traced(run: Callable[[list[Any]], Any], flat: list[Any]) -> Callable[[], Any]:
    """`run(flat)` as one "call" host phase (PVTI_OPTIONS)."""
    def call() -> Any:
        profiling.read_host_tracing()
        with profiling.host_phase("call"):
            return run(flat)
    return call


def prepare(flat: list[Any], options: Options, steps: int, seed: int) -> list[Any]:
    """A call's inputs as (steps, replicas, micro-batch, ...) arrays (`batches`), or with
    synthetic data standard normal draws of their shapes and dtypes (zeros for integers
    and booleans), seeded by `seed`: the same every call."""
    with profiling.host_phase("input preparation"):
        inputs = batches.stacked_inputs(flat, options, steps)
        if not options.synthetic_data:
            return inputs
        rng = np.random.default_rng(seed)
        return [(rng.standard_normal(v.shape, dtype=np.float32).astype(v.dtype)
                 if np.issubdtype(v.dtype, np.floating) else np.zeros_like(v))
                if isinstance(v, np.ndarray) else v for v in inputs]


def finish(per_step: list[list[np.ndarray]], options: Options, flat: list[Any],
           updated: list[int], training: bool, stop: int | None = None
           ) -> tuple[list[Any], list[np.ndarray]]:
    """The outputs (results `len(updated)` to `stop` of each step, by output mode) and
    the in-place updates of the inputs `updated` (the first results of each step). With
    synthetic data nothing is streamed back: outputs read as zeros and the user's inputs
    keep their values."""
    with profiling.host_phase("output copy"):
        if options.synthetic_data:
            per_step = [[np.zeros_like(np.asarray(r)) for r in step] for step in per_step]
            updates = [np.asarray(capture.given_tensor(flat[i]).detach().cpu())
                       for i in updated]
        else:
            updates = input_updates.combine(per_step, options, flat, updated)
        stop = len(per_step[0]) if per_step and stop is None else stop or 0
        outputs = [batches.combine([it[i] for it in per_step], options, training)
                   for i in range(len(updated), stop)]
        return outputs, updates


# TensorLocations' classes and the Streaming Memory transfers of the timeline each
# setting moves to the IO tiles (runtime.machine.scheduler.STREAMING); the optimizer's
# places the loads and stores around the update; accumulators have none (the timeline
# streams none).
_STREAMED = {"weight_location": ("weight_load", None),
             "activation_location": ("activation_load", "activation_store"),
             "optimizer_location": ("update_load", "update_store"),
             "accumulator_location": (None, None)}


def io_streaming(options: Options) -> frozenset[str]:
    """The Streaming Memory transfers `useIOTilesToLoad` / `useIOTilesToStore` of each
    tensor class move to the IO tiles; PopTorch's error without IO tiles."""
    locations = options.TensorLocations
    kinds, settings = set(), []
    for attribute, (load, store) in _STREAMED.items():
        location = getattr(locations, attribute)
        for flag, kind, method in ((location and location.use_io_tiles_to_load, load,
                                    "useIOTilesToLoad"),
                                   (location and location.use_io_tiles_to_store, store,
                                    "useIOTilesToStore")):
            if flag:
                settings.append(f"{attribute}: {method}(True)")
                if kind:
                    kinds.add(kind)
    if settings and not locations.num_io_tiles:
        raise Error("No IO tiles allocated. You must allocate at least 32 IO tiles using "
                    "poptorch.Options().TensorLocations.numIOTiles. "
                    f"({', '.join(settings)})", type="options")
    return frozenset(kinds)
