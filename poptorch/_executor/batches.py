"""How one call's inputs become micro-batches and its outputs one result, as functions of
the options (spec 4.2.3, 4.4): a call's batch is split into deviceIterations x
(gradientAccumulation) x (replicas / input group size) slices; replicas that share an
input group read the same slice; each output is combined over the steps as
`Options.outputMode` asks.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from poptorch._executor import input_check
from poptorch.enums import CommGroupType, OutputMode
from poptorch.errors import Error
from poptorch.options import Options

_NARROWED_NUMPY = {np.dtype(np.int64): np.int32, np.dtype(np.float64): np.float32}


def check_options(options: Options, steps: int) -> None:
    """The input replica grouping and the output mode fit `steps` program runs a call."""
    if options.replication_factor % options.input_group_size:
        raise Error(f"inputReplicaGrouping size {options.input_group_size} is not a factor of "
                    f"replicationFactor({options.replication_factor})", type="options")
    if options.output_mode == OutputMode.EveryN and steps % options.output_return_period:
        raise Error(f"OutputMode.EveryN with a period of {options.output_return_period} needs "
                    f"the {steps} batches of a call to be a multiple of it", type="options")


def call_slices(options: Options, steps: int) -> int:
    """Slices of a call's batch: `steps` program runs x (replicas / input group size)."""
    return steps * (options.replication_factor // options.input_group_size)


def split(flat: list[Any], options: Options, steps: int, accumulation: int | None
          ) -> tuple[list[Any], int]:
    """Micro-batch examples of the flat inputs and the number of slices per call, for
    `steps` program runs per call (`accumulation`: training's gradient accumulation,
    named in the error; None in inference). An empty batch is an error: the IPU's
    programs have no zero-sized tensors (PopART refuses them)."""
    slices = call_slices(options, steps)
    micro = []
    for index, value in enumerate(flat):
        if isinstance(value, torch.Tensor) and value.dim() and value.shape[0] == 0:
            raise Error(f"input {index} has an empty batch (shape {tuple(value.shape)}): "
                        "the IPU runs no zero-sized tensors; give at least one sample "
                        "per micro-batch", type="executor")
        if not isinstance(value, torch.Tensor) or slices == 1:
            micro.append(value)
            continue
        if value.dim() == 0 or value.shape[0] % slices:
            size = "a scalar" if value.dim() == 0 else f"a batch of {value.shape[0]}"
            accumulated = (f" x gradientAccumulation({accumulation})"
                           if accumulation is not None else "")
            raise Error(
                f"input {index} has {size}, which is not a multiple of "
                f"deviceIterations({options.device_iterations}) x replicationFactor"
                f"({options.replication_factor}) / input group size "
                f"({options.input_group_size}){accumulated} = {slices}; give a batch of a "
                f"multiple of {slices}", type="executor")
        micro.append(value[: value.shape[0] // slices])
    return micro, slices


def check_inputs(flat: list[Any], spec: Any, in_spec: Any, in_constants: dict[int, Any],
                 input_meta: list[tuple[tuple[int, ...], torch.dtype]],
                 given_dtypes: list[torch.dtype] | None, model: torch.nn.Module,
                 slices: int) -> list[torch.dtype]:
    """A call's `flat` inputs (structure `spec`) are like those the program was compiled
    for (`input_check`): the same arguments (matched by name), dicts with the same keys
    (in any order), the same non-tensor values, tensor shapes and dtypes. `flat` is put
    in place into the compiled order. Returns the dtypes the user gave for the compiled
    tensor inputs (`given_dtypes`, or this call's if None)."""
    given = list(flat)

    def leaves() -> list[tuple[str, Any]]:
        return input_check.match(given, spec, in_spec, in_constants,
                                 input_check.Signature(model))

    if spec != in_spec:
        flat[:] = [value for _, value in leaves()]
    if given_dtypes is None:
        given_dtypes = input_check.user_dtypes(flat, in_constants, input_meta)
    input_check.check_values(flat, lambda: [path for path, _ in leaves()], in_constants,
                             input_meta, given_dtypes, slices)
    return given_dtypes


def replica_slices(options: Options) -> np.ndarray:
    """For each replica, which of the R / group-size input slices it reads."""
    replicas, size = options.replication_factor, options.input_group_size
    groups = replicas // size
    r = np.arange(replicas)
    if options.input_group_type == CommGroupType.Orthogonal:
        return r % groups
    return r // size


def stacked_inputs(flat: list[Any], options: Options, steps: int) -> list[Any]:
    """Inputs as (steps, replicas, micro-batch, ...) arrays, replicas that share an
    input group reading the same slice."""
    slices = replica_slices(options)
    groups = options.replication_factor // options.input_group_size
    inputs = []
    for value in flat:
        array = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else value
        if isinstance(array, np.ndarray):
            array = array.reshape((steps, groups, array.shape[0] // (steps * groups))
                                  + array.shape[1:]) if array.ndim else array.reshape(1, 1)
            if array.shape[1] != len(slices) or options.input_group_size != 1:
                array = array[:, slices]  # a copy, so not when each replica has its own
        inputs.append(array)
    return inputs


def per_replica(value: np.ndarray, rank: int, replicas: int) -> np.ndarray:
    """Give an output its replica axis (outputs not computed from inputs have none)."""
    if value.ndim > rank:
        return value
    return np.broadcast_to(value, (replicas,) + value.shape)


def combine(iterations: list[np.ndarray], options: Options, training: bool) -> torch.Tensor:
    """Apply the output mode to one output's per-iteration (replicas, ...) arrays."""
    default = OutputMode.Final if training else OutputMode.All
    mode = default if options.output_mode == OutputMode.Default else options.output_mode
    if mode == OutputMode.Final:
        chosen = iterations[-1:]
    elif mode == OutputMode.EveryN:
        chosen = iterations[options.output_return_period - 1:: options.output_return_period]
    elif mode == OutputMode.Sum:
        chosen = [np.sum(np.stack(iterations), axis=0, dtype=iterations[0].dtype)]
    else:
        chosen = iterations
    stacked = np.stack(chosen)  # (iterations, replicas, ...)
    if stacked.shape[0] * stacked.shape[1] == 1:
        result = stacked[0, 0]
    elif stacked.ndim == 2:  # scalar outputs: one value per iteration and replica
        result = stacked.reshape(-1)
    else:
        result = stacked.reshape((-1,) + stacked.shape[3:])
    result = np.ascontiguousarray(result).reshape(np.shape(result))  # keeps 0-d shapes
    if result.dtype in _NARROWED_NUMPY:  # the IPU has no 64-bit types
        result = result.astype(_NARROWED_NUMPY[result.dtype])
    return torch.from_numpy(result)
