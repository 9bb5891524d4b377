"""The training executor (spec 4.2.1): forward, loss, backward and weight update per call.

Per device iteration, each replica runs the joint program on `gradientAccumulation`
micro-batches in turn (buffers such as batch-norm statistics update per micro-batch);
gradients are accumulated (running or post mean, or sum), reduced over replicas by an
`ipu.all_reduce` program (within the replica groups of a replica-grouped weight,
`replica_grouping.py`), and applied by the optimizer's `@optimizer_step` program
(`_compiler/optimizer_program.py`). Weights stay on the device; the host model is
updated lazily: on `copyWeightsToHost`, when the host model's parameters or state_dict
are read, and before an `inferenceModel` of the same module runs (`trainers.py`).

The optimizer's state also stays on the device; the optimizer's state_dict() and
load_state_dict() read and write it (spec 4.5.5, `_OptimizerLink`).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from torch.utils import _pytree as pytree
from torch_mlir import ir
from torch_mlir.dialects import func

from poptorch._compiler import driver
from poptorch._compiler.optimizer_program import GLOBAL, OptimizerSpec, describe
from poptorch._executor import distributed, figures, host_io, trainers, user_api
from poptorch._executor import replica_grouping as grouping
from poptorch._executor.executor import PoplarExecutor
from poptorch._executor.optimizer_attributes import AttributeTracker
from poptorch._frontend import joint
from poptorch.dialects import make_context, replica_group
from poptorch.dialects.placement import symbol_table
from poptorch.dialects.structure import AllReduceOp
from poptorch.dialects.types import element_type_of
from poptorch.enums import MeanReductionStrategy, ReductionType
from poptorch.errors import Error
from poptorch.optim import IPU_KEYS, _IpuOptimizer, load_torch_state
from poptorch.options import Options
from poptorch.passes.precision import Precision
from poptorch.runtime.jit.program import Program, compile_module
from poptorch.runtime.jit.random import device_random


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
        return replace(self, arrays=dict(self.arrays), hyper=list(self.hyper))

    # its part beyond the optimizer's, in a state dict's "ipu_state"
    AUTO_SCALE, GOOD_STEPS = "automatic_loss_scaling.scale", "automatic_loss_scaling.good_steps"

    def automatic(self) -> dict[str, np.ndarray]:
        """The automatic loss scaling state, as arrays."""
        return {self.AUTO_SCALE: np.asarray(self.auto_scale, np.float64),
                self.GOOD_STEPS: np.asarray(self.good_steps, np.int64)}

    def set_automatic(self, values: Mapping[str, np.ndarray]) -> None:
        self.auto_scale = float(values[self.AUTO_SCALE])
        self.good_steps = int(values[self.GOOD_STEPS])


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
        self._attributes: AttributeTracker | None = None  # the compiled optimizer's
        trainers.register(model, self)

    def _accumulation(self) -> int:
        return self._options.Training.gradient_accumulation

    def _capture(self, model, args, kwargs):
        return joint.capture_training(model, args, kwargs)

    def _before_run(self) -> None:
        """Training does not pick up host changes implicitly (copyWeightsToDevice does)."""

    # ---- the optimizer ------------------------------------------------------------------
    def _compile_extra(self) -> None:
        """The optimizer's programs and device state; a refusal leaves the model
        uncompiled (as a refusal before)."""
        try:
            self._compile_optimizer()
        except Error:
            self._compiled = self._programs = self._optimizer_state = None
            raise

    def _compile_optimizer(self) -> None:
        self._check_in_model(self._optimizer, "trainingModel")
        spec = describe(self._optimizer, self._options.Training.automatic_loss_scaling)
        self._attributes = AttributeTracker(self._optimizer,
                                            self._options.relax_optimizer_attributes_checks)
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
            # the weight update rounds to f16 stochastically too (enableStochasticRounding)
            Precision(stochastic_rounding=self._options.Precision.stochastic_rounding).run(
                module.operation)
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
        # a poptorch.optim optimizer's "ipu_state" (loaded, or kept from a previous model),
        # else what torch's state holds (after CPU steps or torch's load_state_dict)
        saved = self._optimizer.state_dict() \
            if isinstance(self._optimizer, _IpuOptimizer) else {}
        host = () if saved.get("ipu_state") is not None else (self._optimizer,
                                                                self._parameters())
        state = OptimizerState(
            spec.initial_state(weights, *host), spec.hyper_values(self._optimizer),
            spec.loss_scaling(self._optimizer))  # the automatic loss scale starts there
        self._restore_saved(state, saved, self._optimizer)
        self._optimizer_state = state
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
                 if name in summed}, replicas, locate=driver.trap_location,
                weights=driver.weight_arguments(captured), persistent=False)
        return summed, summing

    def _main_program(self) -> Program:
        return self._programs.summing or self._compiled.program

    def _param_groups(self, optimizer: torch.optim.Optimizer | None = None) -> dict[int, int]:
        """id(parameter) -> index of its param group in the optimizer (or `optimizer`)."""
        optimizer = self._optimizer if optimizer is None else optimizer
        return {id(p): index for index, group in enumerate(optimizer.param_groups)
                for p in group["params"]}

    def _check_in_model(self, optimizer: torch.optim.Optimizer, where: str) -> None:
        """The optimizer must hold only parameters of the model (frozen ones included):
        any other would silently not train."""
        ours = {id(p) for p in torch.nn.Module.parameters(self._model)}
        for i, group in enumerate(optimizer.param_groups):
            for j, p in enumerate(group["params"]):
                if id(p) not in ours:
                    raise Error(f"{where}: param group {i}, parameter {j} of the optimizer "
                                f"(a tensor of shape {list(p.shape)}) is not a parameter of "
                                "the model being trained; give the optimizer only the "
                                "model's parameters (model.parameters())", type="optimizer")

    def _check_same_groups(self, optimizer: torch.optim.Optimizer) -> None:
        """Each trained parameter keeps its param group: the program was compiled for it."""
        groups = self._param_groups(optimizer)
        for name, compiled, _ in self._programs.spec.params:
            now = groups.get(id(self._model.get_parameter(name)), 0)
            if now != compiled:
                raise Error(f"setOptimizer: parameter {name} is in param group {now} of the "
                            f"new optimizer, but the model was compiled with it in param "
                            f"group {compiled}; keep each parameter in its group, or wrap the "
                            "model again (poptorch.trainingModel) with the new optimizer",
                            type="optimizer")

    def _optimizer_slots(self) -> dict[str, float]:
        """Each trained weight's optimizer state in units of its own bytes."""
        spec, groups = describe(self._optimizer), self._param_groups()
        params = {name: self._model.get_parameter(name)
                  for name in self._compiled.captured.trainable}
        return {name: spec.state_slots(groups.get(id(p), 0), p.element_size())
                for name, p in params.items()}

    def _step_end(self) -> list[tuple[str, str, int, int]]:
        compiled = self._compiled
        with compiled.context:
            return figures.epilogue_of(compiled.module, compiled.captured,
                                             compiled.memory, self._figures.machine,
                                             grouping.run_replicas(self._options),
                                             self._programs.update_cycles,
                                             figures.locations_of(self._options),
                                             self._optimizer_slots())

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

        def group_of(name: str) -> ir.Attribute:
            found = self._groupings.get(name)
            if found is None:
                return replica_group("all")
            # a grouping over several processes' replicas is reduced on the host (`_apply`)
            return replica_group("no_grouping") if found.own is not None \
                else replica_group(*found.replica_group())
        groups = [group_of(name) for name, _ in params]
        with ir.InsertionPoint(module.body):
            @func.FuncOp.from_py_func(*[t for _, t in params], name="reduce_gradients")
            def reduce_gradients(*grads):
                return tuple(AllReduceOp(g, reduction, group, g.type).result
                             for g, group in zip(grads, groups, strict=True))

    def _link_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        """Make the optimizer's state_dict()/load_state_dict() use the device state:
        poptorch.optim classes through their `_ipu_link`, torch.optim ones through
        instance methods (PopTorch patches them in the same way)."""
        link = _OptimizerLink(self, optimizer)
        optimizer._ipu_link = link
        if not isinstance(optimizer, _IpuOptimizer):
            optimizer.state_dict = link.state_dict
            optimizer.load_state_dict = link.load_state_dict

    @staticmethod
    def _unlink_optimizer(optimizer: torch.optim.Optimizer, state_dict: dict | None) -> None:
        """Undo `_link_optimizer`: the optimizer keeps `state_dict` (the device's last; None:
        none) on the host, as torch keeps it (a poptorch.optim one, its "ipu_state" and
        "ipu_param" too); its state_dict()/load_state_dict() are the host's again."""
        optimizer._ipu_link = None
        if not isinstance(optimizer, _IpuOptimizer):
            for name in ("_ipu_link", "state_dict", "load_state_dict"):
                optimizer.__dict__.pop(name, None)
        if state_dict is None:
            return
        if isinstance(optimizer, _IpuOptimizer):
            optimizer.load_state_dict(state_dict)
        else:
            load_torch_state(optimizer, state_dict)

    def _let_go(self, optimizer: torch.optim.Optimizer) -> None:
        """If the optimizer (this model's) reads this model's device state, it keeps the
        device's last state on the host from now on."""
        link = getattr(optimizer, "_ipu_link", None)
        if link is not None and link.serves(self):
            self._unlink_optimizer(optimizer, link.state_dict())

    def setOptimizer(self, optimizer: torch.optim.Optimizer) -> None:  # noqa: N802
        """Apply the optimizer's new variable hyper-parameters without recompiling. Another
        optimizer object takes over the device state; its own (loaded by load_state_dict)
        replaces it, as in PopTorch; the previous one keeps the device's last on the host."""
        self._check_alive()
        self._check_in_model(optimizer, "setOptimizer")
        if self._compiled is not None:
            spec = self._programs.spec
            spec.check_constants(optimizer, "setOptimizer: ")
            self._check_same_groups(optimizer)
            self._attributes.check(optimizer)
            state = self._optimizer_state.copy()
            state.hyper = spec.hyper_values(optimizer)
            if optimizer is not self._optimizer:
                if isinstance(optimizer, _IpuOptimizer):
                    self._restore_saved(state, optimizer.state_dict(), optimizer)
                self._let_go(self._optimizer)
            self._optimizer_state = state
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
        if self._compiled is not None:
            self._let_go(self._optimizer)
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

    def _loss_scaling(self) -> float:
        """The loss scaling in force on the device (setOptimizer, load_state_dict set it)."""
        return self._programs.spec.device_loss_scaling(self._optimizer_state.hyper)

    def _loss_seed(self) -> np.ndarray:
        scaling = self._optimizer_state.auto_scale \
            if self._options.Training.automatic_loss_scaling else self._loss_scaling()
        return np.full(self._compiled.captured.loss_shape, scaling, dtype=np.float32)

    # Automatic loss scaling (setAutomaticLossScaling), PyTorch's dynamic scheme
    # (torch.amp.GradScaler) rather than PopART's histogram one: the gradients carry the
    # automatic scale, which the step's program un-scales them by (the optimizer's
    # loss_scaling is its argument, `describe`); an overflow, in the gradients or in the
    # updated weights, skips the step and halves the scale; GROWTH_INTERVAL good steps
    # double it.
    GROWTH_INTERVAL = 20

    def _hyper(self) -> list[np.ndarray]:
        """The step's hyper-parameters: the automatic scale as its loss_scaling."""
        state = self._optimizer_state
        hyper = list(state.hyper)
        if self._options.Training.automatic_loss_scaling:
            where = self._programs.spec.hyper_layout().index((GLOBAL, "loss_scaling"))
            hyper[where] = np.asarray(state.auto_scale, np.float32)
        return hyper

    def _overflowed(self, arrays: list[np.ndarray]) -> bool:
        """With automatic loss scaling, whether `arrays` hold an inf or NaN: the step is
        then skipped and the scale halved. False (and the scale maybe doubled) else."""
        if not self._options.Training.automatic_loss_scaling:
            return False
        state = self._optimizer_state
        if not all(np.isfinite(a).all() for a in arrays):
            state.auto_scale /= 2
            state.good_steps = 0
            return True
        return False

    def _good_step(self) -> None:
        state = self._optimizer_state
        if self._options.Training.automatic_loss_scaling:
            state.good_steps += 1
            if state.good_steps >= self.GROWTH_INTERVAL:
                state.auto_scale *= 2
                state.good_steps = 0

    def _parameters(self) -> dict[str, torch.Tensor]:
        """The host parameters by name, as the optimizer's param groups hold them."""
        return dict(torch.nn.Module.named_parameters(self._model))

    def _run(self, flat: list[Any]):
        captured = self._compiled.captured
        inputs = host_io.prepare(flat, self._options, self._steps(), self._seed)
        accumulation = self._accumulation()
        updated = captured.mutated_inputs
        # a step's results: the updated inputs, the outputs, the gradients
        n_forward = len(updated) + sum(kind == "output" for kind, _ in captured.results)
        post = self._strategy() != MeanReductionStrategy.Running
        mean = self._mean()
        seed = self._loss_seed()
        per_step = []
        for d in range(self._options.device_iterations):
            total = None
            for g in range(accumulation):
                results = self._step(inputs, d * accumulation + g, {"tangent": seed})
                per_step.append(results[:n_forward])
                grads = results[n_forward:]
                if total is None:
                    total = list(grads)  # sums below make new arrays
                elif mean and not post:  # running mean
                    total = [t + (x - t) / (g + 1) for t, x in zip(total, grads, strict=True)]
                else:
                    total = [t + x for t, x in zip(total, grads, strict=True)]
            if mean and post and accumulation > 1:  # (x / 1 is x: no pass over them)
                total = [t / accumulation for t in total]
            self._apply(total)
        outputs, updates = host_io.finish(per_step, self._options, flat, updated, True,
                                          n_forward)
        leaves = outputs[1:]
        leaves.insert(captured.loss_leaf, outputs[0])
        return pytree.tree_unflatten(leaves, captured.out_spec), updates

    def _step(self, inputs: list[Any], step: int, extra: dict[str, Any] | None = None
              ) -> list[np.ndarray]:
        results = super()._step(inputs, step, extra)
        if self._processes is not None and self._options.broadcast_buffers:
            distributed.broadcast_buffers(self._processes, self._device_weights,
                                          self._compiled.captured.mutated_buffers)
        return results

    def _apply(self, grads: list[np.ndarray]) -> None:
        """Reduce gradients over replicas and run the optimizer step. A replica-grouped
        weight steps as (groups, ...): each group's slice, gradient and state on its own."""
        names = self._compiled.captured.trainable
        programs = self._programs
        rest = [i for i, name in enumerate(names) if name not in programs.summed]
        reduced = list(grads)  # summed by the step's program (`_compile_summing`)
        with np.errstate(all="ignore"):
            for i, g in zip(rest, programs.reduce.run(*(grads[i] for i in rest)), strict=True):
                if names[i] not in self._groupings:
                    reduced[i] = np.array(np.asarray(g)[0])
                elif self._processes is None:  # else reduced over the processes, below
                    reduced[i] = grouping.per_group(self._groupings, names[i], np.asarray(g))
        if self._processes is not None:  # then over the processes (`distributed`)
            reduced = distributed.reduce_gradients(self._processes, names, grads, reduced,
                                                   self._groupings, self._mean())
        if self._overflowed(reduced):
            return  # the step is skipped and the loss scale halved
        layout = programs.spec.state_layout()
        state = self._optimizer_state
        arrays = self._device_weights.arrays
        with np.errstate(all="ignore"), device_random(self._random, 1):
            results = programs.step.run(
                *(grouping.per_group(self._groupings, n, arrays[n]) for n in names), *reduced,
                *(state.arrays[key] for key in layout), *self._hyper())
        if self._overflowed([np.asarray(r) for r in results[:len(names)]]):
            return  # never an inf or NaN in the weights
        self._good_step()
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
        """The optimizer's state dict holding the device's state: torch's (which it also
        puts in `optimizer.state`), and for poptorch.optim, "ipu_state" and "ipu_param"."""
        spec, state = self._programs.spec, self._optimizer_state
        torch_part = spec.state_dict(self._optimizer, state.arrays, self._parameters())
        if not isinstance(self._optimizer, _IpuOptimizer):
            return torch_part
        automatic = state.automatic() if self._options.Training.automatic_loss_scaling else {}
        return {"ipu_state": spec.ipu_state(state.arrays, automatic),
                "ipu_param": spec.ipu_param(state.hyper), **torch_part}

    def _restore_saved(self, state: OptimizerState, saved: dict,
                       optimizer: torch.optim.Optimizer) -> None:
        """Put a state dict's "ipu_state" and "ipu_param" (if any) of `optimizer` in
        `state`."""
        automatic = state.automatic() if self._options.Training.automatic_loss_scaling else {}
        state.arrays, state.hyper, automatic = self._programs.spec.restore(
            optimizer, state.arrays, state.hyper, saved.get("ipu_state"),
            saved.get("ipu_param"), automatic)
        if automatic:
            state.set_automatic(automatic)

    def _load_optimizer_state_dict(self, state_dict: dict) -> None:
        """Make `state_dict` the device's optimizer state: its "ipu_state" and "ipu_param"
        where it has them (a poptorch.optim optimizer's), else torch's "state". The
        optimizer loads torch's part (LR schedulers read its param groups). Nothing
        changes if it cannot be loaded."""
        optimizer, spec = self._optimizer, self._programs.spec
        state = self._optimizer_state.copy()
        self._restore_saved(state, state_dict, optimizer)
        before = {"state": optimizer.state, "param_groups": optimizer.param_groups}
        try:
            load_torch_state(optimizer, state_dict)
            spec.check_constants(optimizer, "load_state_dict: ")
            if state_dict.get(IPU_KEYS[0]) is None:  # torch's state is the state
                arrays = self._device_weights.arrays
                weights = {name: grouping.per_group(self._groupings, name, arrays[name])
                           for name in self._compiled.captured.trainable}
                state.arrays = spec.initial_state(weights, optimizer, self._parameters())
        except Error:
            optimizer.__setstate__(before)  # torch's load replaced both
            raise
        self._optimizer_state = state


class _OptimizerLink:
    """Makes the optimizer's state_dict() / load_state_dict() read and write the device's
    optimizer state (spec 4.5.5). Neither object keeps the other alive."""

    def __init__(self, executor: TrainingExecutor, optimizer: torch.optim.Optimizer) -> None:
        self._executor = weakref.ref(executor)
        self._optimizer = weakref.ref(optimizer)

    def serves(self, executor: TrainingExecutor) -> bool:
        return self._executor() is executor

    def _live(self) -> TrainingExecutor:
        executor = self._executor()
        if executor is None:  # the optimizer is the host's again
            TrainingExecutor._unlink_optimizer(self._optimizer(), None)
            raise Error("the training model that held this optimizer's state on the device "
                        "was deleted without destroy(), and the state with it; keep the "
                        "trainingModel, or call its destroy(), which leaves the state with "
                        "the optimizer", type="optimizer")
        return executor

    def state_dict(self) -> dict:
        return self._live()._optimizer_state_dict()

    def load_state_dict(self, state_dict: dict) -> None:
        self._live()._load_optimizer_state_dict(state_dict)


def _tensor_type(array: np.ndarray) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(list(array.shape), element_type_of(array.dtype))
