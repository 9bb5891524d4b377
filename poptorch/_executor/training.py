"""The training executor (spec 4.2.1): forward, loss, backward and weight update per call.

Per device iteration, each replica runs the joint program on `gradientAccumulation`
micro-batches in turn (buffers such as batch-norm statistics update per micro-batch);
gradients are accumulated (running or post mean, or sum), reduced over replicas by an
`ipu.all_reduce` program (within the replica groups of a replica-grouped weight,
`replica_grouping.py`), and applied by the optimizer's `@optimizer_step` program
(`_compiler/optimizer_program.py`). Weights stay on the device; the host model is
updated lazily: on `copyWeightsToHost`, when the host model's parameters or state_dict
are read, and before an `inferenceModel` of the same module runs (`trainers.py`).
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from torch.utils import _pytree as pytree
from torch_mlir import ir
from torch_mlir.dialects import func

from poptorch._compiler.optimizer_program import GLOBAL, OptimizerSpec, describe
from poptorch._executor import batches, figures, trainers, user_api
from poptorch._executor import replica_grouping as grouping
from poptorch._executor.executor import PoplarExecutor
from poptorch._frontend import joint
from poptorch.dialects import make_context, replica_group
from poptorch.dialects.placement import symbol_table
from poptorch.dialects.structure import AllReduceOp
from poptorch.dialects.types import element_type_of
from poptorch.enums import MeanReductionStrategy, ReductionType
from poptorch.errors import Error
from poptorch.optim import _IpuOptimizer
from poptorch.options import Options
from poptorch.runtime.jit.program import Program, compile_module


@dataclass
class OptimizerPrograms:
    """A trainer's compiled optimizer (`_compile_extra`): what it compiled from, and
    the programs the training step runs beyond the model's own."""

    spec: OptimizerSpec  # the optimizer's description (`optimizer_program.describe`)
    step: Program  # `@optimizer_step`: the weights' update
    reduce: Program  # `@reduce_gradients`: the gradients not in `summed`
    text: str  # the MLIR module of both
    update_cycles: dict[str | None, int]  # the machine model's cycles of `step`
    summed: frozenset[str]  # gradients `summing` returns reduced over replicas
    summing: Program | None  # the model's program doing so (None: it sums none)


@dataclass
class OptimizerState:
    """A trainer's optimizer state on the device, which calls change (and a failed call
    puts back: `copy`)."""

    arrays: dict[tuple[str, str], np.ndarray]  # (weight name or GLOBAL, slot) -> array
    hyper: list[np.ndarray]  # the variable hyper-parameters' values (setOptimizer)
    auto_scale: float  # the automatic loss scale (setAutomaticLossScaling)
    good_steps: int = 0  # steps since the loss scale last changed

    def copy(self) -> OptimizerState:
        """A copy a call does not change (it replaces arrays, never writes into them)."""
        return replace(self, arrays=dict(self.arrays))


class TrainingExecutor(PoplarExecutor):
    """A model wrapped by `trainingModel`.

    Beyond inference's state: the optimizer's programs (`_programs`) and its device state
    (`_optimizer_state`), both None until compiled and after destroy()."""

    def __init__(self, model: torch.nn.Module, options: Options | None,
                 optimizer: torch.optim.Optimizer | None) -> None:
        super().__init__(model, options, training=True)
        self._model.train()
        self._optimizer = optimizer or torch.optim.SGD(model.parameters(), lr=0.01)
        self._programs: OptimizerPrograms | None = None
        self._optimizer_state: OptimizerState | None = None
        trainers.register(model, self)

    def _accumulation(self) -> int:
        return self._options.Training.gradient_accumulation

    def _capture(self, model, args, kwargs):
        return joint.capture_training(model, args, kwargs)

    def _before_run(self) -> None:
        """Training does not pick up host changes implicitly (copyWeightsToDevice does)."""

    # ---- the optimizer ------------------------------------------------------------------
    def _compile_extra(self) -> None:
        spec = describe(self._optimizer)
        self._check_grouped_clipping(spec)
        captured = self._compiled.captured
        groups = self._param_groups()
        arrays = self._device_weights.arrays
        with make_context() as context, ir.Location.unknown():
            params = []
            for name in captured.trainable:
                host = self._model.get_parameter(name)
                array = arrays[name][0] if name in self._groupings else arrays[name]
                params.append((name, groups.get(id(host), 0), _tensor_type(array)))
            module = ir.Module.create()
            spec.emit(module, params)
            update_cycles = figures.optimizer_cycles(
                symbol_table(module.operation)["optimizer_step"],
                [name for name, _, _ in params],
                self._figures.machine)
            summed, summing = self._compile_summing()
            self._emit_reduce(module, [(name, t) for name, _, t in params
                                       if name not in summed])
            self._programs = OptimizerPrograms(
                spec, compile_module(module, "optimizer_step"),
                compile_module(module, "reduce_gradients"), str(module), update_cycles,
                summed, summing)
        del context
        weights = {name: grouping.per_group(self._groupings, name, arrays[name])
                   for name in captured.trainable}
        self._optimizer_state = OptimizerState(
            spec.initial_state(weights, self._optimizer, self._parameters()),
            spec.hyper_values(self._optimizer),
            spec.loss_scaling(self._optimizer))  # the automatic loss scale starts there
        self._link_optimizer(self._optimizer)

    def _compile_summing(self) -> tuple[frozenset[str], Program | None]:
        """The gradients the step's program returns already reduced over replicas, and
        that program: with several replicas, those of weights that are not
        replica-grouped, summed by the JIT where they are made (a weight gradient's
        matmul and its all-reduce become one gemm over every replica's rows), so they
        skip `@reduce_gradients`. The simulated all-reduce is unchanged (`_step_end`)."""
        replicas = self._options.replication_factor
        captured = self._compiled.captured
        summed = frozenset(name for name in captured.trainable if name not in self._groupings)
        if replicas == 1 or not summed:
            return frozenset(), None
        first = len(captured.results) - len(captured.trainable)
        reduction = "mean" if self._mean() else "sum"
        with self._compiled.context:
            summing = compile_module(
                self._compiled.module, "main",
                {first + index: reduction for index, name in enumerate(captured.trainable)
                 if name in summed}, replicas)
        return summed, summing

    def _main_program(self) -> Program:
        return self._programs.summing or self._compiled.program

    def _param_groups(self) -> dict[int, int]:
        """id(parameter) -> index of its param group in the optimizer."""
        return {id(p): index for index, group in enumerate(self._optimizer.param_groups)
                for p in group["params"]}

    def _optimizer_slots(self) -> dict[str, int]:
        spec, groups = describe(self._optimizer), self._param_groups()
        return {name: spec.state_slots(groups.get(id(self._model.get_parameter(name)), 0))
                for name in self._compiled.captured.trainable}

    def _step_end(self) -> list[tuple[str, str, int, int]]:
        compiled = self._compiled
        with compiled.context:
            return figures.epilogue_of(compiled.module, compiled.captured,
                                             compiled.memory, self._figures.machine,
                                             self._options.replication_factor,
                                             self._programs.update_cycles)

    def _check_grouped_clipping(self, spec: OptimizerSpec) -> None:
        """max_grad_norm scales every gradient by one norm over all of them; with
        replica-grouped weights that norm differs between groups, which the shared
        weights' single update cannot follow. When every trained weight has the same
        grouping, each group trains a model of its own and clips by its own norm."""
        if self._groupings and spec.constants.get((GLOBAL, "max_grad_norm")) != math.inf:
            trained = self._compiled.captured.trainable
            layouts = {tuple(self._groupings[n].group_of()) for n in trained
                       if n in self._groupings}
            if all(name in self._groupings for name in trained) and len(layouts) == 1:
                return
            names = ", ".join(self._groupings)
            raise Error(f"max_grad_norm is not supported with replica-grouped weights "
                        f"({names}) unless every trained weight has the same grouping: "
                        "the gradient norm would differ between replica groups; remove "
                        "max_grad_norm or group every weight alike", type="optimizer")

    def _emit_reduce(self, module: ir.Module,
                     params: list[tuple[str, ir.RankedTensorType]]) -> None:
        """`@reduce_gradients`: one `ipu.all_reduce` per gradient, over all replicas, or
        within the replica groups of a replica-grouped weight."""
        reduction = ir.StringAttr.get("mean" if self._mean() else "sum")
        groups = [replica_group(*self._groupings[name].replica_group())
                  if name in self._groupings else replica_group("all") for name, _ in params]
        with ir.InsertionPoint(module.body):
            @func.FuncOp.from_py_func(*[t for _, t in params], name="reduce_gradients")
            def reduce_gradients(*grads):
                return tuple(AllReduceOp(g, reduction, group, g.type).result
                             for g, group in zip(grads, groups, strict=True))

    def _link_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        """Make the optimizer's state_dict()/load_state_dict() use the device state:
        poptorch.optim classes through their `_ipu_link`, torch.optim ones through
        instance methods (PopTorch patches them in the same way)."""
        link = _OptimizerLink(self)
        optimizer._ipu_link = link
        if not isinstance(optimizer, _IpuOptimizer):
            optimizer.state_dict = link.state_dict
            optimizer.load_state_dict = link.load_state_dict

    @staticmethod
    def _unlink_optimizer(optimizer: torch.optim.Optimizer) -> None:
        """Undo `_link_optimizer`: state_dict()/load_state_dict() are the host's again."""
        optimizer._ipu_link = None
        if not isinstance(optimizer, _IpuOptimizer):
            for name in ("_ipu_link", "state_dict", "load_state_dict"):
                optimizer.__dict__.pop(name, None)

    def setOptimizer(self, optimizer: torch.optim.Optimizer) -> None:  # noqa: N802
        """Apply the optimizer's new variable hyper-parameters without recompiling."""
        self._check_alive()
        if self._compiled is not None:
            self._programs.spec.check_constants(optimizer)
            self._optimizer_state.hyper = self._programs.spec.hyper_values(optimizer)
            self._link_optimizer(optimizer)
        self._optimizer = optimizer

    # ---- the device state of a call, destroy ----------------------------------------
    def _snapshot(self) -> dict[str, Any]:
        """Beyond inference's: the optimizer and automatic loss-scaling state (the
        optimizer step replaces its arrays too)."""
        return {**super()._snapshot(), "optimizer": self._optimizer_state.copy()}

    def _restore(self, saved: dict[str, Any]) -> None:
        super()._restore(saved)
        self._optimizer_state = saved["optimizer"]

    def _release(self) -> None:
        """destroy(): the optimizer's state goes to the host optimizer (as torch keeps
        it), which no longer reads the device; the optimizer's programs and state, and the
        model's link to this executor, are dropped."""
        link = getattr(self._optimizer, "_ipu_link", None)
        if self._compiled is not None and link is not None and link.serves(self):
            state = link.state_dict()
            self._unlink_optimizer(self._optimizer)
            torch.optim.Optimizer.load_state_dict(self._optimizer, state)
        trainers.unregister(self._user_model, self)
        self._programs = self._optimizer_state = None
        super()._release()

    # ---- running ------------------------------------------------------------------------
    def _mean(self) -> bool:
        """Mean (default) or Sum reduction over micro-batches and replicas."""
        kind = self._options.Training.accumulation_and_replication_reduction_type
        return kind != ReductionType.Sum

    def _strategy(self) -> MeanReductionStrategy:
        """The spec's default: Running when the optimizer accumulates in float16, else Post."""
        chosen = self._options.Training.mean_reduction_strategy
        if chosen is not None:
            return chosen
        half = getattr(self._optimizer, "accum_type", torch.float32) == torch.float16
        return MeanReductionStrategy.Running if half else MeanReductionStrategy.Post

    def _loss_seed(self) -> np.ndarray:
        scaling = self._optimizer_state.auto_scale \
            if self._options.Training.automatic_loss_scaling \
            else self._programs.spec.loss_scaling(self._optimizer)
        return np.full(self._compiled.captured.loss_shape, scaling, dtype=np.float32)

    # Automatic loss scaling (setAutomaticLossScaling): a dynamic scale that halves on a
    # gradient overflow (skipping that step) and doubles after GROWTH_INTERVAL good steps.
    GROWTH_INTERVAL = 20

    def _rescale(self, grads: list[np.ndarray]) -> bool:
        """Check the scaled gradients; bring them to the optimizer's own loss scaling (which
        its program divides by) in place. False when they overflowed."""
        state = self._optimizer_state
        if not all(np.isfinite(g).all() for g in grads):
            state.auto_scale /= 2
            state.good_steps = 0
            return False
        factor = self._programs.spec.loss_scaling(self._optimizer) / state.auto_scale
        for g in grads:
            g *= g.dtype.type(factor)
        state.good_steps += 1
        if state.good_steps >= self.GROWTH_INTERVAL:
            state.auto_scale *= 2
            state.good_steps = 0
        return True

    def _parameters(self) -> dict[str, torch.Tensor]:
        """The host parameters by name, as the optimizer's param groups hold them."""
        return dict(torch.nn.Module.named_parameters(self._model))

    def _run(self, flat: list[Any]):
        captured = self._compiled.captured
        inputs = batches.stacked_inputs(flat, self._options, self._steps())
        accumulation = self._accumulation()
        n_outputs = sum(kind == "output" for kind, _ in captured.results)
        post = self._strategy() != MeanReductionStrategy.Running
        mean = self._mean()
        seed = self._loss_seed()
        per_step = []
        for d in range(self._options.device_iterations):
            total = None
            for g in range(accumulation):
                results = self._step(inputs, d * accumulation + g, {"tangent": seed})
                per_step.append(results[:n_outputs])
                grads = results[n_outputs:]
                if total is None:
                    total = list(grads)  # sums below make new arrays
                elif mean and not post:  # running mean
                    total = [t + (x - t) / (g + 1) for t, x in zip(total, grads, strict=True)]
                else:
                    total = [t + x for t, x in zip(total, grads, strict=True)]
            if mean and post:
                total = [t / accumulation for t in total]
            self._apply(total)
        outputs = [batches.combine([step[i] for step in per_step], self._options, True)
                   for i in range(n_outputs)]
        leaves = outputs[1:]
        leaves.insert(captured.loss_leaf, outputs[0])
        return pytree.tree_unflatten(leaves, captured.out_spec)

    def _apply(self, grads: list[np.ndarray]) -> None:
        """Reduce gradients over replicas and run the optimizer step. A replica-grouped
        weight steps as (groups, ...): each group's slice, gradient and state on its own."""
        names = self._compiled.captured.trainable
        programs = self._programs
        rest = [i for i, name in enumerate(names) if name not in programs.summed]
        reduced = list(grads)  # summed by the step's program (`_compile_summing`)
        with np.errstate(all="ignore"):
            for i, g in zip(rest, programs.reduce.run(*(grads[i] for i in rest)), strict=True):
                reduced[i] = (grouping.per_group(self._groupings, names[i], np.asarray(g))
                              if names[i] in self._groupings else np.array(np.asarray(g)[0]))
        if self._options.Training.automatic_loss_scaling and not self._rescale(reduced):
            return  # overflow: the step is skipped and the loss scale halved
        layout = programs.spec.state_layout()
        state = self._optimizer_state
        arrays = self._device_weights.arrays
        with np.errstate(all="ignore"):
            results = programs.step.run(
                *(grouping.per_group(self._groupings, n, arrays[n]) for n in names), *reduced,
                *(state.arrays[key] for key in layout), *state.hyper)
        self._device_weights.store_weights(
            (name, grouping.per_replica(self._groupings, name, np.asarray(value)))
            for name, value in zip(names, results[:len(names)], strict=True))
        for key, value in zip(layout, results[len(names):], strict=True):
            state.arrays[key] = np.asarray(value)
        self._record_anchors([], [], {  # Options.anchorTensor's gradients, updated weights
            **{user_api.GRADIENT + n: g for n, g in zip(names, reduced, strict=True)},
            **{user_api.UPDATED + n: arrays[n] for n in names}})

    # ---- weights ------------------------------------------------------------------------
    def _written_back(self):
        """Beyond the replica-grouped parameters, copyWeightsToHost writes the trained
        weights and mutated buffers (not the frozen ones), cast to the host's dtypes."""
        captured = self._compiled.captured
        return ((name, dict(self._user_params_and_buffers())[name])
                for name in [*captured.trainable, *captured.mutated_buffers]
                if name not in self._frozen and name not in self._groupings)

    def _user_params_and_buffers(self):
        # super() skips _SyncedModule's hook: no recursion into copyWeightsToHostIfNeeded
        model = self._model
        yield from torch.nn.Module.named_parameters(model)
        yield from torch.nn.Module.named_buffers(model)

    # ---- the optimizer's state_dict (`_OptimizerLink`) ----------------------------------
    def _optimizer_state_dict(self) -> dict:
        """torch's state dict of the optimizer, holding the device's state."""
        return self._programs.spec.state_dict(self._optimizer, self._optimizer_state.arrays,
                                              self._parameters())

    def _load_optimizer_state_dict(self, state_dict: dict) -> None:
        """Make `state_dict` (torch's) the device's optimizer state."""
        spec = self._programs.spec
        arrays = self._device_weights.arrays
        weights = {name: grouping.per_group(self._groupings, name, arrays[name])
                   for name in self._compiled.captured.trainable}
        self._optimizer_state.arrays = spec.load_state_dict(
            self._optimizer, state_dict, weights, self._parameters())
        spec.check_constants(self._optimizer)


class _OptimizerLink:
    """Makes the optimizer's state_dict() / load_state_dict() read and write the device's
    optimizer state (spec 4.5.5)."""

    def __init__(self, executor: TrainingExecutor) -> None:
        self._executor = weakref.ref(executor)

    def serves(self, executor: TrainingExecutor) -> bool:
        return self._executor() is executor

    def state_dict(self) -> dict:
        return self._executor()._optimizer_state_dict()

    def load_state_dict(self, state_dict: dict) -> None:
        self._executor()._load_optimizer_state_dict(state_dict)


def _tensor_type(array: np.ndarray) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(list(array.shape), element_type_of(array.dtype))
