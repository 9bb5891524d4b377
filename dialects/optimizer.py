"""ipu ops of the optimizer family: one op per weight update (PopART's SGD, Adam, Lamb ...).

Each op takes the weight, its gradient (summed over accumulation and replicas, still
loss-scaled), its state tensors, and the hyper-parameters as 0-d f32 tensor operands, so
that `setOptimizer` can change them without recompiling; it returns the new weight and
new state tensors. `grad_scale` multiplies the gradient first: it is 1/loss_scaling
times the gradient-clipping factor. Structural choices (nesterov, centered, ...) are
i1 attributes. State tensors have the weight's shape and an f16 or f32 element type
(PopTorch's accumulator types); `step` counts updates as a 0-d f32 tensor. A state that
a flag switches off (`grad_avg` without `centered`) is a 0-d placeholder operand that
the op passes through, since an op here has a fixed number of operands.
"""

from torch_mlir import ir
from torch_mlir.dialects.ext import Operand, Pure, Result, result

from .ipu import Bool, Ipu, VerifyError, bool_attr, shape_str, tensor_type, verified

STATE_ELEMENT_TYPES = ("f16", "f32")


def _is_scalar_f32(t: ir.RankedTensorType) -> bool:
    return t.rank == 0 and str(t.element_type) == "f32"


def _float_tensor(value: ir.Value, what: str) -> ir.RankedTensorType:
    t = tensor_type(value, what)
    if str(t.element_type) not in STATE_ELEMENT_TYPES:
        raise VerifyError(f"{what} element type must be f16 or f32, got {t.element_type}")
    return t


def _check_state(op: ir.OpView, name: str, weight: ir.RankedTensorType) -> None:
    """A state operand: weight-shaped floats, a 0-d placeholder, or the 0-d f32 step."""
    t = tensor_type(getattr(op, name), f"state '{name}'")
    flag = type(op).OPTIONAL.get(name)
    if name == "step":
        if not _is_scalar_f32(t):
            raise VerifyError(f"state 'step' must be a 0-d f32 tensor, got {t}")
    elif flag is not None and not bool_attr(op, flag):
        if t.rank != 0:
            raise VerifyError(f"state '{name}' must be a 0-d placeholder when {flag} = false, "
                              f"got {t}")
    else:
        _float_tensor(getattr(op, name), f"state '{name}'")
        if list(t.shape) != list(weight.shape):
            raise VerifyError(f"state '{name}' shape {shape_str(t.shape)} differs from the "
                              f"weight shape {shape_str(weight.shape)}")
    new = getattr(op, f"new_{name}").type
    if new != t:
        raise VerifyError(f"result 'new_{name}' type {new} differs from state '{name}' type {t}")


def _check_step(op: "StepOp") -> None:
    """Flags are booleans, hyper-parameters 0-d f32, the gradient and states fit the weight."""
    cls = type(op)
    for flag in cls.FLAGS:
        bool_attr(op, flag)
    weight = _float_tensor(op.weight, "weight")
    grad = _float_tensor(op.grad, "gradient")
    if list(grad.shape) != list(weight.shape):
        raise VerifyError(f"gradient shape {shape_str(grad.shape)} differs from the weight "
                          f"shape {shape_str(weight.shape)}")
    for name in cls.HYPERS:
        t = tensor_type(getattr(op, name), f"hyper-parameter '{name}'")
        if not _is_scalar_f32(t):
            raise VerifyError(f"hyper-parameter '{name}' must be a 0-d f32 tensor, got {t}")
    for name in cls.STATES:
        _check_state(op, name, weight)
    if op.new_weight.type != weight:
        raise VerifyError(f"result 'new_weight' type {op.new_weight.type} differs from the "
                          f"weight type {weight}")


class StepOp(Ipu.Operation):
    """Base of the optimizer updates: names the operand roles the shared verifier checks.

    `STATES` are the state operands (each with a `new_<name>` result), `HYPERS` the 0-d
    f32 operands, `FLAGS` the i1 attributes, `OPTIONAL` maps a state to the flag that
    switches it on.
    """

    STATES = ()
    HYPERS = ()
    FLAGS = ()
    OPTIONAL = {}

    verify_invariants = verified(_check_step)


class SgdStepOp(StepOp, name="sgd_step", traits=[Pure]):
    """Plain SGD: `w - lr * (g * grad_scale + weight_decay * w)` (no momentum, no state).

    `%w1 = "ipu.sgd_step"(%w, %g, %gs, %lr, %wd) : (tensor<4xf32>, tensor<4xf32>,
        tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<4xf32>`
    """

    weight: Operand[ir.RankedTensorType]
    grad: Operand[ir.RankedTensorType]
    grad_scale: Operand[ir.RankedTensorType]
    lr: Operand[ir.RankedTensorType]
    weight_decay: Operand[ir.RankedTensorType]
    new_weight: Result[ir.RankedTensorType] = result()

    HYPERS = ("grad_scale", "lr", "weight_decay")


class SgdMomentumStepOp(StepOp, name="sgd_momentum_step", traits=[Pure]):
    """SGD with momentum as torch.optim.SGD (the first step takes the gradient undamped).

    `velocity` holds the momentum buffer times `velocity_scaling` (PopTorch's combined
    variant; 1 for the separate one); `nesterov` looks ahead along the velocity.
    `%w1, %v1, %s1 = "ipu.sgd_momentum_step"(%w, %g, %v, %s, %gs, %lr, %m, %d, %wd, %vs)
        {nesterov = false} : (...) -> (tensor<4xf32>, tensor<4xf16>, tensor<f32>)`
    """

    weight: Operand[ir.RankedTensorType]
    grad: Operand[ir.RankedTensorType]
    velocity: Operand[ir.RankedTensorType]
    step: Operand[ir.RankedTensorType]
    grad_scale: Operand[ir.RankedTensorType]
    lr: Operand[ir.RankedTensorType]
    momentum: Operand[ir.RankedTensorType]
    dampening: Operand[ir.RankedTensorType]
    weight_decay: Operand[ir.RankedTensorType]
    velocity_scaling: Operand[ir.RankedTensorType]
    nesterov: Bool
    new_weight: Result[ir.RankedTensorType] = result()
    new_velocity: Result[ir.RankedTensorType] = result()
    new_step: Result[ir.RankedTensorType] = result()

    STATES = ("velocity", "step")
    HYPERS = ("grad_scale", "lr", "momentum", "dampening", "weight_decay", "velocity_scaling")
    FLAGS = ("nesterov",)


class AdamStepOp(StepOp, name="adam_step", traits=[Pure]):
    """Adam (torch.optim.Adam), or AdamW with `decoupled` weight decay.

    `bias_correction` divides the moments by `1 - beta ** step`.
    `%w1, %m1, %v1, %s1 = "ipu.adam_step"(%w, %g, %m, %v, %s, %gs, %lr, %b1, %b2, %eps,
        %wd) {bias_correction = true, decoupled = false} : (...) -> (...)`
    """

    weight: Operand[ir.RankedTensorType]
    grad: Operand[ir.RankedTensorType]
    exp_avg: Operand[ir.RankedTensorType]
    exp_avg_sq: Operand[ir.RankedTensorType]
    step: Operand[ir.RankedTensorType]
    grad_scale: Operand[ir.RankedTensorType]
    lr: Operand[ir.RankedTensorType]
    beta1: Operand[ir.RankedTensorType]
    beta2: Operand[ir.RankedTensorType]
    eps: Operand[ir.RankedTensorType]
    weight_decay: Operand[ir.RankedTensorType]
    decoupled: Bool
    bias_correction: Bool
    new_weight: Result[ir.RankedTensorType] = result()
    new_exp_avg: Result[ir.RankedTensorType] = result()
    new_exp_avg_sq: Result[ir.RankedTensorType] = result()
    new_step: Result[ir.RankedTensorType] = result()

    STATES = ("exp_avg", "exp_avg_sq", "step")
    HYPERS = ("grad_scale", "lr", "beta1", "beta2", "eps", "weight_decay")
    FLAGS = ("decoupled", "bias_correction")


class RmspropStepOp(StepOp, name="rmsprop_step", traits=[Pure]):
    """RMSprop (torch.optim.RMSprop), or TensorFlow's variant with `use_tf_variant`.

    `grad_avg` is a 0-d placeholder unless `centered`, `momentum_buffer` one unless
    `use_momentum`. The TF variant takes eps inside the square root and accumulates
    the learning rate in the momentum buffer.
    `%w1, %sq1, %ga1, %mb1, %s1 = "ipu.rmsprop_step"(%w, %g, %sq, %ga, %mb, %s, %gs, %lr,
        %alpha, %eps, %wd, %m) {centered = true, use_momentum = false,
        use_tf_variant = false} : (...) -> (...)`
    """

    weight: Operand[ir.RankedTensorType]
    grad: Operand[ir.RankedTensorType]
    square_avg: Operand[ir.RankedTensorType]
    grad_avg: Operand[ir.RankedTensorType]
    momentum_buffer: Operand[ir.RankedTensorType]
    step: Operand[ir.RankedTensorType]
    grad_scale: Operand[ir.RankedTensorType]
    lr: Operand[ir.RankedTensorType]
    alpha: Operand[ir.RankedTensorType]
    eps: Operand[ir.RankedTensorType]
    weight_decay: Operand[ir.RankedTensorType]
    momentum: Operand[ir.RankedTensorType]
    centered: Bool
    use_momentum: Bool
    use_tf_variant: Bool
    new_weight: Result[ir.RankedTensorType] = result()
    new_square_avg: Result[ir.RankedTensorType] = result()
    new_grad_avg: Result[ir.RankedTensorType] = result()
    new_momentum_buffer: Result[ir.RankedTensorType] = result()
    new_step: Result[ir.RankedTensorType] = result()

    STATES = ("square_avg", "grad_avg", "momentum_buffer", "step")
    HYPERS = ("grad_scale", "lr", "alpha", "eps", "weight_decay", "momentum")
    FLAGS = ("centered", "use_momentum", "use_tf_variant")
    OPTIONAL = {"grad_avg": "centered", "momentum_buffer": "use_momentum"}


class LambStepOp(StepOp, name="lamb_step", traits=[Pure]):
    """LAMB: an Adam direction plus weight decay, scaled by the layer's trust ratio.

    The ratio is `min(||w||, max_weight_norm) / ||update||` (1 when either norm is 0).
    `%w1, %m1, %v1, %s1 = "ipu.lamb_step"(%w, %g, %m, %v, %s, %gs, %lr, %b1, %b2, %eps,
        %wd, %mwn) {bias_correction = true} : (...) -> (...)`
    """

    weight: Operand[ir.RankedTensorType]
    grad: Operand[ir.RankedTensorType]
    exp_avg: Operand[ir.RankedTensorType]
    exp_avg_sq: Operand[ir.RankedTensorType]
    step: Operand[ir.RankedTensorType]
    grad_scale: Operand[ir.RankedTensorType]
    lr: Operand[ir.RankedTensorType]
    beta1: Operand[ir.RankedTensorType]
    beta2: Operand[ir.RankedTensorType]
    eps: Operand[ir.RankedTensorType]
    weight_decay: Operand[ir.RankedTensorType]
    max_weight_norm: Operand[ir.RankedTensorType]
    bias_correction: Bool
    new_weight: Result[ir.RankedTensorType] = result()
    new_exp_avg: Result[ir.RankedTensorType] = result()
    new_exp_avg_sq: Result[ir.RankedTensorType] = result()
    new_step: Result[ir.RankedTensorType] = result()

    STATES = ("exp_avg", "exp_avg_sq", "step")
    HYPERS = ("grad_scale", "lr", "beta1", "beta2", "eps", "weight_decay", "max_weight_norm")
    FLAGS = ("bias_correction",)
