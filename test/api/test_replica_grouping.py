"""Replica-grouped weights (spec 4.4.3): replicaGrouping, CommGroupType groups,
VariableRetrievalMode retrieval, inputReplicaGrouping, in training and inference."""

import pickle
import re

import numpy as np
import pytest
import torch

import poptorch
from poptorch._executor.replica_grouping import ReplicaGrouping
from poptorch.enums import CommGroupType, VariableRetrievalMode


class ModelWithLoss(torch.nn.Module):
    """Spec listing 4.14."""

    def __init__(self, W_init):  # noqa: N803 - the spec's names
        super().__init__()
        self.W = torch.nn.Parameter(W_init)

    def forward(self, X):  # noqa: N803
        Z = X @ self.W  # noqa: N806
        return Z, poptorch.identity_loss(Z**2, reduction="mean")


def _spec_problem():
    random = np.random.RandomState(seed=100)
    prob_X = random.normal(size=(24, 40)).astype(np.float32)  # noqa: N806
    prob_W_init = random.normal(size=(40, 56)).astype(np.float32) * (5 * 8)**-0.5  # noqa: N806
    return prob_X, prob_W_init


def _numpy_reference(prob_X, prob_W_init, tensor_shards, data_shards, steps, lr):  # noqa: N803
    """The listing's maths written out: replica r reads X slice r // tensor_shards
    (Consecutive input groups of tensor_shards) and holds W slice r % tensor_shards
    (Orthogonal groups of data_shards); per-replica loss mean(Z**2); each slice's
    gradient is the mean over its group's replicas; plain SGD."""
    replicas = tensor_shards * data_shards
    xs = prob_X.reshape(data_shards, -1, prob_X.shape[1])
    ws = prob_W_init.reshape(prob_W_init.shape[0], tensor_shards, -1).transpose(1, 0, 2).copy()
    losses = []
    for _ in range(steps):
        per_replica, grads = [], np.zeros_like(ws)
        for r in range(replicas):
            x, w = xs[r // tensor_shards], ws[r % tensor_shards]
            z = x @ w
            per_replica.append(np.mean(z**2))
            grads[r % tensor_shards] += x.T @ (2 * z / z.size) / data_shards
        losses.append(np.mean(per_replica))
        ws -= lr * grads
    return np.array(losses), ws.transpose(1, 0, 2).reshape(prob_W_init.shape)


def test_spec_listing_4_14():
    tensor_shards, data_shards = 4, 2
    prob_X, prob_W_init = _spec_problem()  # noqa: N806
    prob_steps = 4
    X = torch.tensor(prob_X)  # noqa: N806
    W_init = torch.tensor(  # noqa: N806
        prob_W_init.reshape(prob_W_init.shape[0], tensor_shards,
                            prob_W_init.shape[1] // tensor_shards).transpose(1, 0, 2)).contiguous()
    m = ModelWithLoss(W_init)
    optim = torch.optim.SGD(m.parameters(), lr=0.01)
    pt_opts = poptorch.Options()
    pt_opts.replicationFactor(data_shards * tensor_shards)
    pt_opts.inputReplicaGrouping(tensor_shards, poptorch.enums.CommGroupType.Consecutive)
    pt_m = poptorch.trainingModel(m, optimizer=optim, options=pt_opts)
    pt_m.W.replicaGrouping(poptorch.enums.CommGroupType.Orthogonal, data_shards,
                           poptorch.enums.VariableRetrievalMode.OnePerGroup)
    pt_losses = []
    if data_shards > 1:
        X = X.reshape(data_shards, X.shape[0] // data_shards, *X.shape[1:])  # noqa: N806
    for _ in range(prob_steps):
        _, loss = pt_m(X)
        assert loss.shape == (data_shards * tensor_shards,)
        pt_losses.append(torch.sum(loss.detach()) / (data_shards * tensor_shards))
    pt_losses = np.array(pt_losses)
    pt_W_final = m.W.detach().numpy().transpose(1, 0, 2).reshape(prob_W_init.shape)  # noqa: N806

    losses, W_final = _numpy_reference(prob_X, prob_W_init, tensor_shards, data_shards,  # noqa: N806
                                       prob_steps, lr=0.01)
    np.testing.assert_allclose(pt_losses, losses, rtol=1e-5)
    np.testing.assert_allclose(pt_W_final, W_final, rtol=1e-5, atol=1e-6)
    assert m.W.shape == (tensor_shards, 40, 56 // tensor_shards)


def _spec_trainer(mode=VariableRetrievalMode.OnePerGroup):
    prob_X, prob_W_init = _spec_problem()  # noqa: N806
    W_init = torch.tensor(prob_W_init.reshape(40, 4, 14).transpose(1, 0, 2)).contiguous()  # noqa: N806
    m = ModelWithLoss(W_init)
    opts = poptorch.Options().replicationFactor(8)
    opts.inputReplicaGrouping(4, CommGroupType.Consecutive)
    pt_m = poptorch.trainingModel(m, opts, torch.optim.SGD(m.parameters(), lr=0.01))
    pt_m.W.replicaGrouping(CommGroupType.Orthogonal, 2, mode)
    return m, pt_m, torch.tensor(prob_X).reshape(2, 12, 40)


def test_all_replicas_retrieval():
    """AllReplicas: copyWeightsToHost writes one value per replica, (replicas, ...);
    replicas of one orthogonal group hold the same slice."""
    grouped_model, grouped, x = _spec_trainer()
    m, pt_m, _ = _spec_trainer(VariableRetrievalMode.AllReplicas)
    for _ in range(2):
        grouped(x)
        pt_m(x)
    pt_m.copyWeightsToHost()
    per_group = grouped_model.W.detach()
    assert m.W.shape == (8, 40, 14)
    torch.testing.assert_close(m.W.detach(), per_group[torch.arange(8) % 4])
    # uploaded again, each group takes its first replica's value
    pt_m.copyWeightsToDevice()
    _, loss = pt_m(x)
    _, expected = grouped(x)
    torch.testing.assert_close(loss, expected)


class Affine(torch.nn.Module):
    def __init__(self, groups):
        super().__init__()
        self.W = torch.nn.Parameter(torch.randn(groups, 6, 3))
        self.b = torch.nn.Parameter(torch.randn(3))

    def forward(self, x, y):
        out = x @ self.W + self.b
        return out, torch.nn.functional.mse_loss(out, y)


def _torch_reference(w, b, xs, ys, group_of, steps, reduce):
    """SGD on CPU: replica r holds w[group_of[r]] and the shared b; W's gradient is
    reduced within its group, b's over every replica."""
    w, b = w.clone(), b.clone()
    for _ in range(steps):
        gw, gb = torch.zeros_like(w), torch.zeros_like(b)
        counts = torch.bincount(torch.as_tensor(group_of), minlength=w.shape[0])
        for r, g in enumerate(group_of):
            wr, br = w[g].clone().requires_grad_(), b.clone().requires_grad_()
            torch.nn.functional.mse_loss(xs[r] @ wr + br, ys[r]).backward()
            gw[g] += wr.grad / (counts[g] if reduce == "mean" else 1)
            gb += br.grad / (len(group_of) if reduce == "mean" else 1)
        w, b = w - 0.1 * gw, b - 0.1 * gb
    return w, b


@pytest.mark.parametrize("reduction", [poptorch.ReductionType.Mean, poptorch.ReductionType.Sum])
def test_consecutive_grouping_training(reduction):
    """Consecutive groups of 2 over 4 replicas: {0, 1}, {2, 3}; a shared bias next to
    the grouped weight; the reduction type follows accumulationAndReplicationReductionType."""
    torch.manual_seed(0)
    model = Affine(groups=2)
    w0, b0 = model.W.detach().clone(), model.b.detach().clone()
    opts = poptorch.Options().replicationFactor(4)
    opts.Training.accumulationAndReplicationReductionType(reduction)
    trainer = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.1))
    trainer.W.replicaGrouping(CommGroupType.Consecutive, 2, VariableRetrievalMode.OnePerGroup)
    x, y = torch.randn(4 * 5, 6), torch.randn(4 * 5, 3)
    for _ in range(3):
        trainer(x, y)
    reduce = "mean" if reduction == poptorch.ReductionType.Mean else "sum"
    w, b = _torch_reference(w0, b0, x.reshape(4, 5, 6), y.reshape(4, 5, 3), [0, 0, 1, 1],
                            3, reduce)
    torch.testing.assert_close(model.W.detach(), w)
    torch.testing.assert_close(model.b.detach(), b)


def test_adam_state_per_group():
    """Adam's moments live per group: (groups, ...) like the host parameter, and match
    torch's Adam stepping the stacked slices with their group-mean gradients."""
    torch.manual_seed(1)
    model = Affine(groups=2)
    del model.b
    model.b = torch.zeros(3)
    reference = torch.nn.Parameter(model.W.detach().clone())
    cpu_adam = torch.optim.Adam([reference], lr=0.05)
    opts = poptorch.Options().replicationFactor(4)
    adam = torch.optim.Adam(model.parameters(), lr=0.05)
    trainer = poptorch.trainingModel(model, opts, adam)
    trainer.W.replicaGrouping(CommGroupType.Orthogonal, 2, VariableRetrievalMode.OnePerGroup)
    x, y = torch.randn(4 * 2, 6), torch.randn(4 * 2, 3)
    xs, ys = x.reshape(4, 2, 6), y.reshape(4, 2, 3)
    for _ in range(3):
        trainer(x, y)
        cpu_adam.zero_grad()
        loss = sum(torch.nn.functional.mse_loss(xs[r] @ reference[r % 2], ys[r]) for r in range(4))
        (loss / 2).backward()  # the mean over each group's 2 replicas
        cpu_adam.step()
    torch.testing.assert_close(model.W.detach(), reference.detach())
    state = adam.state_dict()["state"][0]
    assert state["exp_avg"].shape == (2, 6, 3)
    torch.testing.assert_close(state["exp_avg"], cpu_adam.state[reference]["exp_avg"])


def test_lamb_trust_ratio_per_group():
    """LAMB's weight and update norms are taken per group: each group trains as an
    ungrouped model fed only its own replica's data would."""
    torch.manual_seed(2)
    x, y = torch.randn(2 * 4, 6), torch.randn(2 * 4, 3)
    model = Affine(groups=2)
    del model.b
    model.b = torch.zeros(3)
    starts = model.W.detach().clone()
    opts = poptorch.Options().replicationFactor(2)
    trainer = poptorch.trainingModel(model, opts, poptorch.optim.LAMB(model.parameters(), lr=0.1))
    trainer.W.replicaGrouping(CommGroupType.NoGrouping, 1, VariableRetrievalMode.OnePerGroup)
    for _ in range(2):
        trainer(x, y)
    for g in range(2):
        single = Affine(groups=1)
        del single.b
        single.b = torch.zeros(3)
        single.W = torch.nn.Parameter(starts[g].clone())
        alone = poptorch.trainingModel(single, None, poptorch.optim.LAMB(single.parameters(),
                                                                         lr=0.1))
        for _ in range(2):
            alone(x[4 * g: 4 * g + 4], y[4 * g: 4 * g + 4])
        torch.testing.assert_close(model.W.detach()[g], single.W.detach())


class GroupedNet(torch.nn.Module):
    """Every trained parameter replica-grouped: each group trains a model of its own."""

    def __init__(self, groups):
        super().__init__()
        self.W1 = torch.nn.Parameter(torch.randn(groups, 5, 7) * 0.5)
        self.b1 = torch.nn.Parameter(torch.randn(groups, 7) * 0.1)
        self.W2 = torch.nn.Parameter(torch.randn(groups, 7, 3) * 0.5)

    def forward(self, x, y):
        out = torch.tanh(x @ self.W1 + self.b1) @ self.W2
        return out, torch.nn.functional.cross_entropy(out, y)


class OneGroup(torch.nn.Module):
    """One group's copy of a GroupedNet, for the CPU reference."""

    def __init__(self, grouped, group):
        super().__init__()
        for name, param in grouped.named_parameters():
            setattr(self, name, torch.nn.Parameter(param.detach()[group].clone()))

    forward = GroupedNet.forward


GROUP_OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=0.01),
    "adam": lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.01),
    "adamw": lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.05),
    "rmsprop": lambda p: torch.optim.RMSprop(p, lr=0.01, momentum=0.5, centered=True),
    "lamb": lambda p: poptorch.optim.LAMB(p, lr=0.01, weight_decay=0.01),
}


GROUPINGS = [(CommGroupType.NoGrouping, 1), (CommGroupType.Consecutive, 2),
             (CommGroupType.Orthogonal, 2)]


def _train_groups(make_ipu, make_cpu, grouping, clip=None):
    """Train a GroupedNet on 4 replicas (2 accumulated micro-batches, 2 device
    iterations) and, on the CPU, each group's own copy with its own optimizer on its
    replicas' slices of the batch (the mean over its replicas and micro-batches), once
    per device iteration, clipped to `clip` by clip_grad_norm_ if given; compare."""
    replicas, accumulation, iterations, micro = 4, 2, 2, 3
    kind, size = grouping
    torch.manual_seed(0)
    model = GroupedNet(replicas // size)
    group_of = ReplicaGrouping(kind, size, VariableRetrievalMode.OnePerGroup,
                               replicas).group_of().tolist()
    copies = [OneGroup(model, g) for g in range(replicas // size)]
    optimizers = [make_cpu(c.parameters()) for c in copies]
    opts = poptorch.Options().replicationFactor(replicas).deviceIterations(iterations)
    opts.Training.gradientAccumulation(accumulation)
    ipu = poptorch.trainingModel(model, opts, make_ipu(model.parameters()))
    for name in ("W1", "b1", "W2"):
        getattr(ipu, name).replicaGrouping(kind, size, VariableRetrievalMode.OnePerGroup)
    for _ in range(2):
        x = torch.randn(iterations * accumulation * replicas * micro, 5)
        y = torch.randint(0, 3, (iterations * accumulation * replicas * micro,))
        ipu(x, y)
        xs = x.reshape(iterations, accumulation, replicas, micro, 5)
        ys = y.reshape(iterations, accumulation, replicas, micro)
        for d in range(iterations):
            for g, (copy, cpu) in enumerate(zip(copies, optimizers, strict=True)):
                members = [r for r in range(replicas) if group_of[r] == g]
                cpu.zero_grad()
                for a in range(accumulation):
                    for r in members:
                        loss = copy(xs[d, a, r], ys[d, a, r])[1]
                        (loss / (accumulation * len(members))).backward()
                if clip is not None:
                    assert torch.nn.utils.clip_grad_norm_(copy.parameters(), clip) > clip
                cpu.step()
    for name, param in model.named_parameters():
        for g, copy in enumerate(copies):
            torch.testing.assert_close(param.detach()[g], getattr(copy, name).detach(),
                                       rtol=1e-4, atol=1e-6, msg=lambda m, n=name, i=g:
                                       f"{n}, group {i}: {m}")


@pytest.mark.parametrize("grouping", GROUPINGS)
@pytest.mark.parametrize("optimizer", list(GROUP_OPTIMIZERS))
def test_each_group_trains_its_own_copy(optimizer, grouping):
    """The CPU reference of replica-grouped training (issue 22, item 2): with every
    parameter grouped, each replica group trains its own copy of the model."""
    _train_groups(GROUP_OPTIMIZERS[optimizer], GROUP_OPTIMIZERS[optimizer], grouping)


def _lamb_clipped(params):
    optimizer = poptorch.optim.LAMB(params, lr=0.01, weight_decay=0.01)
    optimizer.max_grad_norm = 0.05
    return optimizer


CLIPPED = {  # (the optimizer clipping on the IPU, the CPU's after clip_grad_norm_)
    "sgd": (lambda p: poptorch.optim.SGD(p, lr=0.1, momentum=0.9, max_grad_norm=0.05),
            lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9)),
    "adam": (lambda p: poptorch.optim.Adam(p, lr=0.01, max_grad_norm=0.05),
             lambda p: torch.optim.Adam(p, lr=0.01)),
    "adamw": (lambda p: poptorch.optim.AdamW(p, lr=0.01, max_grad_norm=0.05,
                                             loss_scaling=16.0),
              lambda p: torch.optim.AdamW(p, lr=0.01)),
    "lamb": (_lamb_clipped, lambda p: poptorch.optim.LAMB(p, lr=0.01, weight_decay=0.01)),
}


@pytest.mark.parametrize("grouping", GROUPINGS)
@pytest.mark.parametrize("optimizer", list(CLIPPED))
def test_each_group_clips_by_its_own_norm(optimizer, grouping):
    """max_grad_norm with every weight grouped alike: each group's copy is clipped by
    the norm of its own gradients, as clip_grad_norm_ on that copy."""
    _train_groups(*CLIPPED[optimizer], grouping, clip=0.05)


def test_trained_slices_read_through_the_wrapper():
    """The spec reads `m.W` (the module); PopTorch's wrapper gives the same values."""
    torch.manual_seed(5)
    model = ModelWithLoss(torch.randn(2, 5, 3))
    ipu = poptorch.trainingModel(model, poptorch.Options().replicationFactor(4),
                                 torch.optim.SGD(model.parameters(), lr=0.1))
    ipu.W.replicaGrouping(CommGroupType.Orthogonal, 2, VariableRetrievalMode.OnePerGroup)
    before = model.W.detach().clone()
    ipu(torch.randn(8, 5))
    through_wrapper = [dict(ipu.named_parameters())["W"].detach().clone(),
                       ipu.state_dict()["W"].clone()]
    trained = model.W.detach()
    assert not torch.equal(trained, before)
    for value in through_wrapper:
        torch.testing.assert_close(value, trained)


class Layers(torch.nn.Module):
    """Per-replica weights in the kernel families that take weights: matmul, conv,
    embedding, normalisation."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(10, 4)
        self.conv = torch.nn.Conv1d(4, 5, 3, padding=1)
        self.norm = torch.nn.LayerNorm(5)
        self.fc = torch.nn.Linear(5, 2)

    def forward(self, tokens):
        h = self.embed(tokens).transpose(1, 2)
        h = self.norm(self.conv(h).transpose(1, 2))
        return self.fc(h)


def test_inference_per_replica_weights():
    """Each replica computes with its group's slice (Orthogonal groups of 2 over 4
    replicas: replica r holds slice r % 2), over 2 device iterations."""
    torch.manual_seed(3)
    grouped = {"embed.weight": (2, 10, 4), "conv.weight": (2, 5, 4, 3), "norm.bias": (2, 5),
               "fc.weight": (2, 2, 5)}
    model = Layers()
    for name, shape in grouped.items():
        owner, _, attr = name.rpartition(".")
        setattr(model.get_submodule(owner), attr, torch.nn.Parameter(torch.randn(shape)))
    slices = [Layers() for _ in range(2)]
    for g, copy in enumerate(slices):
        copy.load_state_dict({k: v[g] if k in grouped else v
                              for k, v in model.state_dict().items()})
        copy.eval()
    opts = poptorch.Options().replicationFactor(4).deviceIterations(2)
    ipu = poptorch.inferenceModel(model, opts)
    for name in grouped:
        ipu.per_replica_params[name] = (CommGroupType.Orthogonal, 2,
                                        VariableRetrievalMode.OnePerGroup)
    ipu.fc.weight.replicaGrouping(CommGroupType.Orthogonal, 2, VariableRetrievalMode.OnePerGroup)
    tokens = torch.randint(0, 10, (2 * 4 * 3, 7))
    out = ipu(tokens)
    assert out.shape == (24, 7, 2)
    with torch.no_grad():
        for step in range(2):
            for r in range(4):
                rows = slice((step * 4 + r) * 3, (step * 4 + r + 1) * 3)
                torch.testing.assert_close(out[rows], slices[r % 2](tokens[rows]),
                                           rtol=1e-5, atol=1e-5)


def test_all_group_type_has_no_effect():
    torch.manual_seed(4)
    model = torch.nn.Linear(3, 2)
    ipu = poptorch.inferenceModel(model, poptorch.Options().replicationFactor(2))
    ipu.weight.replicaGrouping(CommGroupType.All, 2, VariableRetrievalMode.OnePerGroup)
    x = torch.randn(4, 3)
    torch.testing.assert_close(ipu(x), model(x).detach())


# ---- errors ---------------------------------------------------------------------------
def _linear_trainer(replicas=8):
    model = ModelWithLoss(torch.randn(4, 40, 14))
    opts = poptorch.Options().replicationFactor(replicas)
    return poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.01))


@pytest.mark.parametrize("args, message", [
    ((CommGroupType.Orthogonal, 3, VariableRetrievalMode.OnePerGroup),
     "W.replicaGrouping: shards=3 replicas per group does not divide replicationFactor(8); "
     "use a factor of 8"),
    ((1, 2, VariableRetrievalMode.OnePerGroup),
     "W.replicaGrouping: comm_group_type must be a poptorch.CommGroupType (All, Consecutive, "
     "Orthogonal, NoGrouping), got 1"),
    ((CommGroupType.Consecutive, 2.0, VariableRetrievalMode.OnePerGroup),
     "W.replicaGrouping: shards (the number of replicas in each group) must be an int >= 1, "
     "got 2.0"),
    ((CommGroupType.Consecutive, 0, VariableRetrievalMode.OnePerGroup),
     "W.replicaGrouping: shards (the number of replicas in each group) must be an int >= 1, "
     "got 0"),
    ((CommGroupType.Consecutive, 2, "OnePerGroup"),
     "W.replicaGrouping: variable_retrieval_mode must be a poptorch.VariableRetrievalMode "
     "(OnePerGroup, AllReplicas), got 'OnePerGroup'"),
])
def test_bad_arguments(args, message):
    trainer = _linear_trainer()
    with pytest.raises(poptorch.Error, match=f"^{re.escape(message)}$"):
        trainer.W.replicaGrouping(*args)


def test_after_compile():
    trainer = _linear_trainer()
    trainer.compile(torch.randn(8 * 4, 12, 40))
    with pytest.raises(poptorch.Error, match=re.escape(
            "W.replicaGrouping was called after the model was compiled; call it before the "
            "first call or compile(), or wrap the model again")):
        trainer.W.replicaGrouping(CommGroupType.Orthogonal, 2, VariableRetrievalMode.OnePerGroup)


def test_host_shape_must_have_one_slice_per_group():
    trainer = _linear_trainer()
    trainer.W.replicaGrouping(CommGroupType.Consecutive, 4, VariableRetrievalMode.OnePerGroup)
    with pytest.raises(poptorch.Error, match=re.escape(
            "parameter W has shape [4, 40, 14], but replicaGrouping(CommGroupType.Consecutive, "
            "4) with replicationFactor(8) makes 2 replica groups: give W a first dimension of "
            "2, one slice per group")):
        trainer(torch.randn(8, 12, 40))


def test_replication_changed_after_grouping():
    """The grouping is checked again at compile time, against the options then."""
    trainer = _linear_trainer()
    trainer.W.replicaGrouping(CommGroupType.Orthogonal, 4, VariableRetrievalMode.OnePerGroup)
    trainer.options.replicationFactor(6)
    with pytest.raises(poptorch.Error, match=re.escape(
            "W.replicaGrouping: shards=4 replicas per group does not divide "
            "replicationFactor(6); use a factor of 6")):
        trainer(torch.randn(6, 12, 40))


def test_unknown_per_replica_param():
    trainer = _linear_trainer()
    trainer.per_replica_params["V"] = (CommGroupType.Orthogonal, 2,
                                       VariableRetrievalMode.OnePerGroup)
    with pytest.raises(poptorch.Error, match=re.escape(
            "per_replica_params names 'V', which is not a parameter of the model; use a name "
            "from model.named_parameters()")):
        trainer(torch.randn(8, 12, 40))


def test_max_grad_norm_with_grouped_and_shared_weights():
    """A shared weight next to a grouped one: no single norm serves every replica."""
    model = Affine(groups=4)
    optimizer = poptorch.optim.SGD(model.parameters(), lr=0.01, max_grad_norm=1.0)
    trainer = poptorch.trainingModel(model, poptorch.Options().replicationFactor(8), optimizer)
    trainer.W.replicaGrouping(CommGroupType.Orthogonal, 2, VariableRetrievalMode.OnePerGroup)
    with pytest.raises(poptorch.Error, match=re.escape(
            "max_grad_norm is not supported with replica-grouped weights (W) unless every "
            "trained weight has the same grouping: the gradient norm would differ between "
            "replica groups; remove max_grad_norm or group every weight alike")):
        trainer(torch.randn(8, 6), torch.randn(8, 3))


def test_unwrapped_parameter():
    """A pickled parameter keeps the method but not the executor it belonged to."""
    trainer = _linear_trainer()
    param = pickle.loads(pickle.dumps(trainer.W))
    with pytest.raises(poptorch.Error, match=re.escape(
            "W.replicaGrouping: the parameter belongs to no live wrapped model; wrap the "
            "model with poptorch.inferenceModel or trainingModel, keep the wrapper, and call "
            "replicaGrouping on its parameter")):
        param.replicaGrouping(CommGroupType.Orthogonal, 2, VariableRetrievalMode.OnePerGroup)
