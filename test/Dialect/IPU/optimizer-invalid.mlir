// RUN: ipu-opt %s --split-input-file --verify-diagnostics

// One case per way an op of dialects/optimizer.py can fail to verify: the shared Python
// verifier of the `ipu.*_step` ops ("'ipu.x' op ..."), and examples of the IRDL
// constraints the classes declare (a missing attribute, an unranked operand), which
// IRDL reports in its own words.

func.func @sgd_step$integer_weight(%w: tensor<4xi32>, %g: tensor<4xf32>, %h: tensor<f32>, %x: tensor<f32>) {
  // expected-error @+1 {{'ipu.sgd_step' op weight element type must be f16 or f32, got i32}}
  %0 = "ipu.sgd_step"(%w, %g, %h, %x, %h) : (tensor<4xi32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<4xi32>
  return
}

// -----

func.func @sgd_step$bf16_gradient(%w: tensor<4xf32>, %g: tensor<4xbf16>, %h: tensor<f32>, %x: tensor<f32>) {
  // expected-error @+1 {{'ipu.sgd_step' op gradient element type must be f16 or f32, got bf16}}
  %0 = "ipu.sgd_step"(%w, %g, %h, %x, %h) : (tensor<4xf32>, tensor<4xbf16>, tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<4xf32>
  return
}

// -----

func.func @sgd_step$gradient_shape(%w: tensor<4xf32>, %g: tensor<3xf32>, %h: tensor<f32>, %x: tensor<f32>) {
  // expected-error @+1 {{'ipu.sgd_step' op gradient shape 3 differs from the weight shape 4}}
  %0 = "ipu.sgd_step"(%w, %g, %h, %x, %h) : (tensor<4xf32>, tensor<3xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<4xf32>
  return
}

// -----

func.func @sgd_step$hyper_not_scalar(%w: tensor<4xf32>, %g: tensor<4xf32>, %h: tensor<f32>, %x: tensor<1xf32>) {
  // expected-error @+1 {{'ipu.sgd_step' op hyper-parameter 'lr' must be a 0-d f32 tensor, got tensor<1xf32>}}
  %0 = "ipu.sgd_step"(%w, %g, %h, %x, %h) : (tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<1xf32>, tensor<f32>) -> tensor<4xf32>
  return
}

// -----

func.func @sgd_step$hyper_f16(%w: tensor<4xf32>, %g: tensor<4xf32>, %h: tensor<f32>, %x: tensor<f16>) {
  // expected-error @+1 {{'ipu.sgd_step' op hyper-parameter 'lr' must be a 0-d f32 tensor, got tensor<f16>}}
  %0 = "ipu.sgd_step"(%w, %g, %h, %x, %h) : (tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f16>, tensor<f32>) -> tensor<4xf32>
  return
}

// -----

func.func @sgd_step$new_weight_type(%w: tensor<4xf32>, %g: tensor<4xf32>, %h: tensor<f32>, %x: tensor<f32>) {
  // expected-error @+1 {{'ipu.sgd_step' op result 'new_weight' type tensor<4xf16> differs from the weight type tensor<4xf32>}}
  %0 = "ipu.sgd_step"(%w, %g, %h, %x, %h) : (tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<4xf16>
  return
}

// -----

func.func @adam_step$state_element_type(%w: tensor<4xf32>, %m: tensor<4xf64>, %v: tensor<4xf32>, %s: tensor<f32>, %h: tensor<f32>) {
  // expected-error @+1 {{'ipu.adam_step' op state 'exp_avg' element type must be f16 or f32, got f64}}
  %0:4 = "ipu.adam_step"(%w, %w, %m, %v, %s, %h, %h, %h, %h, %h, %h) {decoupled = false, bias_correction = true} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf64>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf64>, tensor<4xf32>, tensor<f32>)
  return
}

// -----

func.func @adam_step$state_shape(%w: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<2x2xf32>, %s: tensor<f32>, %h: tensor<f32>) {
  // expected-error @+1 {{'ipu.adam_step' op state 'exp_avg_sq' shape 2x2 differs from the weight shape 4}}
  %0:4 = "ipu.adam_step"(%w, %w, %m, %v, %s, %h, %h, %h, %h, %h, %h) {decoupled = false, bias_correction = true} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2x2xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<2x2xf32>, tensor<f32>)
  return
}

// -----

func.func @adam_step$step_type(%w: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>, %s: tensor<i32>, %h: tensor<f32>) {
  // expected-error @+1 {{'ipu.adam_step' op state 'step' must be a 0-d f32 tensor, got tensor<i32>}}
  %0:4 = "ipu.adam_step"(%w, %w, %m, %v, %s, %h, %h, %h, %h, %h, %h) {decoupled = false, bias_correction = true} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<i32>)
  return
}

// -----

func.func @adam_step$new_state_type(%w: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>, %s: tensor<f32>, %h: tensor<f32>) {
  // expected-error @+1 {{'ipu.adam_step' op result 'new_exp_avg' type tensor<4xf16> differs from state 'exp_avg' type tensor<4xf32>}}
  %0:4 = "ipu.adam_step"(%w, %w, %m, %v, %s, %h, %h, %h, %h, %h, %h) {decoupled = false, bias_correction = true} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf16>, tensor<4xf32>, tensor<f32>)
  return
}

// -----

func.func @adam_step$flag_not_bool(%w: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>, %s: tensor<f32>, %h: tensor<f32>) {
  // expected-error @+1 {{'ipu.adam_step' op attribute 'decoupled' must be true or false, got 1 : i64}}
  %0:4 = "ipu.adam_step"(%w, %w, %m, %v, %s, %h, %h, %h, %h, %h, %h) {decoupled = 1 : i64, bias_correction = true} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>)
  return
}

// -----

func.func @adam_step$missing_flag(%w: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>, %s: tensor<f32>, %h: tensor<f32>) {
  // expected-error @+1 {{attribute "bias_correction" is expected but not provided}}
  %0:4 = "ipu.adam_step"(%w, %w, %m, %v, %s, %h, %h, %h, %h, %h, %h) {decoupled = false} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>)
  return
}

// -----

func.func @rmsprop_step$placeholder(%w: tensor<4xf32>, %h: tensor<f32>) {
  // expected-error @+1 {{'ipu.rmsprop_step' op state 'grad_avg' must be a 0-d placeholder when centered = false, got tensor<4xf32>}}
  %0:5 = "ipu.rmsprop_step"(%w, %w, %w, %w, %h, %h, %h, %h, %h, %h, %h, %h) {centered = false, use_momentum = false, use_tf_variant = false} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>)
  return
}

// -----

func.func @lamb_step$unranked(%w: tensor<*xf32>, %h: tensor<f32>) {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.unranked_tensor'}}
  %0:4 = "ipu.lamb_step"(%w, %w, %w, %w, %h, %h, %h, %h, %h, %h, %h, %h) {bias_correction = true} : (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<f32>)
  return
}
