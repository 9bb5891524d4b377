"""poptorch.Options (spec 11.1): how a model is compiled and executed."""

from __future__ import annotations

import os

from .enums import CommGroupType, OutputMode
from .errors import Error


class Options:
    """Set of all options controlling how a model is compiled and executed."""

    def __init__(self) -> None:
        self.device_iterations = 1
        self.replication_factor = 1
        self.output_mode = OutputMode.Default
        self.output_return_period = 1
        self.input_group_size = 1
        self.input_group_type = CommGroupType.Consecutive
        self.random_seed: int | None = None
        self.broadcast_buffers = True
        self.use_ipu_model = bool(int(os.environ.get("POPTORCH_IPU_MODEL", "0") or 0))
        self.ir_dump_dir: str | None = os.environ.get("POPTORCH_DUMP_IR") or None

    def deviceIterations(self, device_iterations: int) -> Options:  # noqa: N802
        if device_iterations < 1:
            raise Error(f"deviceIterations must be >= 1, got {device_iterations}")
        self.device_iterations = device_iterations
        return self

    def replicationFactor(self, replication_factor: int) -> Options:  # noqa: N802
        if replication_factor < 1:
            raise Error(f"replicationFactor must be >= 1, got {replication_factor}")
        self.replication_factor = replication_factor
        return self

    def outputMode(self, output_mode: OutputMode, output_return_period: int | None = None  # noqa: N802
                   ) -> Options:
        self.output_mode = OutputMode(output_mode)
        if self.output_mode == OutputMode.EveryN:
            if not output_return_period or output_return_period < 1:
                raise Error("OutputMode.EveryN needs an output_return_period >= 1")
            self.output_return_period = output_return_period
        return self

    def randomSeed(self, random_seed: int) -> Options:  # noqa: N802
        self.random_seed = int(random_seed)
        return self

    def useIpuModel(self, use_model: bool) -> Options:  # noqa: N802
        self.use_ipu_model = bool(use_model)
        return self

    def broadcastBuffers(self, broadcast_buffers: bool = True) -> Options:  # noqa: N802
        self.broadcast_buffers = bool(broadcast_buffers)
        return self

    def dumpIR(self, directory: str | None) -> Options:  # noqa: N802
        """Write the IR after capture, conversion and every pass into `directory`
        (poptorch-mlir's own option; POPTORCH_DUMP_IR=directory does the same)."""
        self.ir_dump_dir = directory
        return self
