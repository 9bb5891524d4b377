"""NumPy kernels of the optimizer family: ipu.sgd_step, sgd_momentum_step, adam_step,
rmsprop_step and lamb_step, step for step as torch.optim computes them.

Arrays arrive without replica axes (the executor reduces gradients first); a
replica-grouped weight arrives with a leading group axis, which the elementwise
updates broadcast over and LAMB's norms keep (one trust ratio per group). The gradient
scale is one number, or one per group when every weight is grouped and clipped. Updates
compute in float32 and round each result back to its operand's dtype, so float16 state
(PopTorch's accumulator types) is stored as float16. Scalar-only arithmetic (bias
corrections, `1 - beta`) runs in double from the f32 hyper-parameters, as torch.optim
does it in Python floats, and meets the arrays as one float32 number.
"""

from __future__ import annotations

import numpy as np

from poptorch.dialects.optimizer import (
    AdamStepOp,
    LambStepOp,
    RmspropStepOp,
    SgdMomentumStepOp,
    SgdStepOp,
)
from poptorch.runtime.jit.kernels.common import with_ranks
from poptorch.runtime.jit.kernels.registry import kernel

F32 = np.float32


def _f32(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=F32)


def _scalar(x: np.ndarray) -> float:
    """A 0-d hyper-parameter as a Python float (double) for scalar arithmetic."""
    return float(x)


def _scale(grad_scale: np.ndarray, g: np.ndarray) -> np.ndarray:
    """The gradient scale as float32, shaped to multiply `g`. It is declared 0-d, but
    when every weight is replica-grouped and clipped it carries one value per group
    (the groups' own gradient norms): (groups,) then lines up with g's group axis."""
    scale = _f32(grad_scale)
    return scale.reshape(scale.shape + (1,) * (np.ndim(g) - scale.ndim)) if scale.ndim else scale


def _like(value: np.ndarray, operand: np.ndarray) -> np.ndarray:
    """`value` in the dtype of the operand it replaces."""
    return np.asarray(value).astype(operand.dtype, copy=False)


def _lerp(start: np.ndarray, end: np.ndarray, weight: float) -> np.ndarray:
    """torch.lerp with a scalar weight (the two formulas of ATen's CPU kernel)."""
    w = F32(weight)
    if abs(weight) < 0.5:
        return start + w * (end - start)
    return end - (end - start) * F32(1 - weight)


def _decayed_grad(w: np.ndarray, g: np.ndarray, grad_scale: np.ndarray,
                  weight_decay: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(weight, gradient * grad_scale + weight_decay * weight) in float32. A scale of 1
    and a decay of 0 are skipped, as torch.optim skips them: the same numbers (x * 1 is
    x) with two passes over the arrays fewer."""
    w32 = _f32(w)
    g32 = _f32(g)
    if np.any(grad_scale != 1):
        g32 = g32 * _scale(grad_scale, g32)
    if _scalar(weight_decay) != 0:
        g32 = g32 + _f32(weight_decay) * w32
    return w32, g32


def _stepped(w32: np.ndarray, lr: np.ndarray, d: np.ndarray) -> np.ndarray:
    """w - lr * d, the product's array reused for the result."""
    step = np.asarray(d * _f32(lr))  # 0-d operands give NumPy scalars
    return np.subtract(w32, step, out=step)


@kernel(SgdStepOp)
def sgd_step(w, g, grad_scale, lr, weight_decay):
    w32, d = _decayed_grad(w, g, grad_scale, weight_decay)
    return _like(_stepped(w32, lr, d), w)


@kernel(SgdMomentumStepOp)
def sgd_momentum_step(w, g, velocity, step, grad_scale, lr, momentum, dampening,
                      weight_decay, velocity_scaling, nesterov):
    w32, d = _decayed_grad(w, g, grad_scale, weight_decay)
    scaling = _scalar(velocity_scaling)
    if step == 0:  # torch.optim.SGD starts the buffer at the first gradient, undamped
        buf = d
    else:
        buf = _f32(velocity) / F32(scaling) if scaling != 1 else _f32(velocity)
        buf = buf * _f32(momentum)
        buf += d if _scalar(dampening) == 0 else F32(1 - _scalar(dampening)) * d
    d = d + _f32(momentum) * buf if nesterov else buf
    velocity_out = buf * F32(scaling) if scaling != 1 else buf
    return (_like(_stepped(w32, lr, d), w), _like(velocity_out, velocity),
            _like(step + 1, step))


def _bias_corrections(step: float, beta1: np.ndarray, beta2: np.ndarray,
                      enabled: bool) -> tuple[float, float]:
    if not enabled:
        return 1.0, 1.0
    return 1 - _scalar(beta1) ** step, 1 - _scalar(beta2) ** step


def _moments(g, exp_avg, exp_avg_sq, beta1, beta2):
    """torch's `exp_avg.lerp_(g, 1 - beta1)` and `exp_avg_sq * beta2 + (1 - beta2) g g`."""
    m = _lerp(_f32(exp_avg), g, 1 - _scalar(beta1))
    v = _f32(exp_avg_sq) * _f32(beta2) + F32(1 - _scalar(beta2)) * g * g
    return m, v


@kernel(AdamStepOp)
def adam_step(w, g, exp_avg, exp_avg_sq, step, grad_scale, lr, beta1, beta2, eps,
              weight_decay, decoupled, bias_correction):
    t = float(step) + 1
    w32 = _f32(w)
    g32 = _f32(g) * _scale(grad_scale, g)
    if decoupled:
        w32 = w32 * F32(1 - _scalar(lr) * _scalar(weight_decay))
    else:
        g32 = g32 + _f32(weight_decay) * w32
    m, v = _moments(g32, exp_avg, exp_avg_sq, beta1, beta2)
    bc1, bc2 = _bias_corrections(t, beta1, beta2, bias_correction)
    denom = np.sqrt(v) / F32(bc2**0.5) + _f32(eps)
    new_w = w32 + F32(-_scalar(lr) / bc1) * (m / denom)
    return _like(new_w, w), _like(m, exp_avg), _like(v, exp_avg_sq), _like(t, step)


@kernel(RmspropStepOp)
def rmsprop_step(w, g, square_avg, grad_avg, momentum_buffer, step, grad_scale, lr, alpha,
                 eps, weight_decay, momentum, centered, use_momentum, use_tf_variant):
    w32, d = _decayed_grad(w, g, grad_scale, weight_decay)
    sq = _f32(square_avg) * _f32(alpha) + F32(1 - _scalar(alpha)) * d * d
    mean_sq = sq
    if centered:
        ga = _lerp(_f32(grad_avg), d, 1 - _scalar(alpha))
        mean_sq = sq - ga * ga
        grad_avg = _like(ga, grad_avg)
    if use_tf_variant:
        avg = np.sqrt(mean_sq + _f32(eps))
    else:
        avg = np.sqrt(mean_sq) + _f32(eps)
    if not use_momentum:
        new_w = w32 - _f32(lr) * (d / avg)
    elif use_tf_variant:  # TensorFlow accumulates the learning rate in the buffer
        buf = _f32(momentum_buffer) * _f32(momentum) + _f32(lr) * (d / avg)
        new_w, momentum_buffer = w32 - buf, _like(buf, momentum_buffer)
    else:
        buf = _f32(momentum_buffer) * _f32(momentum) + d / avg
        new_w, momentum_buffer = w32 - _f32(lr) * buf, _like(buf, momentum_buffer)
    return (_like(new_w, w), _like(sq, square_avg), grad_avg, momentum_buffer,
            _like(step + 1, step))


def _norm(x: np.ndarray, rank: int) -> np.ndarray:
    """The norm over the declared dimensions, kept as size-1 dims after leading axes."""
    axes = tuple(range(x.ndim - rank, x.ndim))
    return np.sqrt(np.sum(np.square(x, dtype=F32), axis=axes, keepdims=True, dtype=F32))


@kernel(LambStepOp, static=with_ranks)
def lamb_step(w, g, exp_avg, exp_avg_sq, step, grad_scale, lr, beta1, beta2, eps,
              weight_decay, max_weight_norm, bias_correction, rank):
    t = float(step) + 1
    w32 = _f32(w)
    g32 = _f32(g) * _scale(grad_scale, g)
    m = _f32(exp_avg) * _f32(beta1) + F32(1 - _scalar(beta1)) * g32
    v = _f32(exp_avg_sq) * _f32(beta2) + F32(1 - _scalar(beta2)) * g32 * g32
    bc1, bc2 = _bias_corrections(t, beta1, beta2, bias_correction)
    update = (m / F32(bc1)) / (np.sqrt(v / F32(bc2)) + _f32(eps)) + _f32(weight_decay) * w32
    w_norm = np.minimum(_norm(w32, rank), _f32(max_weight_norm))
    u_norm = _norm(update, rank)
    ratio = np.ones_like(w_norm)
    np.divide(w_norm, u_norm, out=ratio, where=(w_norm > 0) & (u_norm > 0))
    new_w = w32 - _f32(lr) * ratio * update
    return _like(new_w, w), _like(m, exp_avg), _like(v, exp_avg_sq), _like(t, step)
