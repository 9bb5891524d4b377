"""PopTorch's enumerations (spec 11.8 and the enums that Options and DataLoader take).

Member names are PopTorch's; values are only meaningful inside poptorch-mlir.
"""

import enum


class OutputMode(enum.IntEnum):
    """Which results a call returns when it runs several iterations (spec 5.7).

    All: a result for each batch; Sum: the sum of all the batches; Final: the last
    batch; EveryN: every N batches (N is `output_return_period`); Default: All for
    inference, Final for training.
    """

    All = 0
    Sum = 1
    Final = 2
    EveryN = 3
    Default = 4


class CommGroupType(enum.IntEnum):
    """How replicas are grouped for input batches and grouped variables (spec 4.4.3).

    All: every replica in one group (not valid for inputs); Consecutive: groups of
    consecutive replicas; Orthogonal: groups sliced across the replica ordering;
    NoGrouping: each replica on its own.
    """

    All = 0
    Consecutive = 1
    Orthogonal = 2
    NoGrouping = 3


class VariableRetrievalMode(enum.IntEnum):
    """How the value of a replica-grouped variable is read back to the host.

    OnePerGroup: one value per replica group (from the group's first replica);
    AllReplicas: one value per replica.
    """

    OnePerGroup = 0
    AllReplicas = 1


class DataLoaderMode(enum.IntEnum):
    """How `poptorch.DataLoader` reads its dataset.

    Sync: synchronously; Async: through an AsynchronousDataAccessor; AsyncRebatched:
    like Async, with the workers loading batches of 1 rebatched by the accessor.
    """

    Sync = 0
    Async = 1
    AsyncRebatched = 2


class SharingStrategy(enum.IntEnum):
    """How a dataset is passed to new worker processes (AsynchronousDataAccessor)."""

    SharedMemory = 0
    FileSystem = 1
    Fork = 2
    ForkServer = 3


class ConnectionType(enum.IntEnum):
    """When to attach to the IPU: Always (from the start, the default), OnDemand
    (when the executable is ready to run) or Never (offline compilation only)."""

    Always = 0
    OnDemand = 1
    Never = 2


class SyncPattern(enum.IntEnum):
    """Synchronisation in multi-IPU systems: Full (all IPUs on every communication,
    the default), SinglePipeline (each IPU syncs with the host independently) or
    ReplicaAndLadder (IPU groups alternate host IO and computation)."""

    Full = 0
    SinglePipeline = 1
    ReplicaAndLadder = 2


class ReductionType(enum.IntEnum):
    """Sum, Mean, or NoReduction of a set of values."""

    Sum = 0
    Mean = 1
    NoReduction = 2


class MeanReductionStrategy(enum.IntEnum):
    """When a mean gradient reduction divides: Running (keep a running mean), Post
    (divide after reducing) or PostAndLoss (deprecated legacy behaviour)."""

    Running = 0
    Post = 1
    PostAndLoss = 2


class HalfFloatCastingBehavior(enum.IntEnum):
    """Casting of ops mixing float16 and float32 (Precision.halfFloatCasting)."""

    FloatDowncastToHalf = 0
    HalfUpcastToFloat = 1
    Default = 2


class OverlapMode(enum.IntEnum):
    """Overlap of host IO with computation for an input or output (IO tiles)."""

    NoOverlap = 0
    OverlapAccumulationLoop = 1
    OverlapDeviceIterationLoop = 2


class MatMulSerializationMode(enum.Enum):
    """Which dimension of a matrix multiplication `serializedMatMul` splits."""

    InputChannels = "input_channels"
    ReducingDim = "reducing_dim"
    OutputChannels = "output_channels"
    Disabled = "none"


class Liveness(enum.IntEnum):
    """Where tensors live between phases of a phased execution."""

    AlwaysLive = 0
    OffChipAfterFwd = 1
    OffChipAfterFwdNoOverlap = 2
    OffChipAfterEachPhase = 3


class AutoStage(enum.IntEnum):
    """How blocks without an explicit stage get one: SameAsIpu or AutoIncrement."""

    SameAsIpu = 0
    AutoIncrement = 1


class MultiConvPlanType(enum.IntEnum):
    """How a MultiConv runs its convolutions: Parallel (default) or Serial."""

    Parallel = 0
    Serial = 1


class PipelineSchedule(enum.IntEnum):
    """Beyond PopTorch: the training schedule of PipelinedExecution.

    OneForwardOneBackward (the default, what PopART's pipeline does: its stash holds a
    bounded number of micro-batches) interleaves forwards and backwards, with at most as
    many micro-batches in flight as there are pipeline stages; FillMainFlush runs the
    forward of every micro-batch of an accumulation step, then their backward, so that
    every micro-batch is stashed at once."""

    FillMainFlush = 0
    OneForwardOneBackward = 1
