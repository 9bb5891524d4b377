// RUN: ipu-opt %s | FileCheck %s
// RUN: ipu-opt %s | ipu-opt | FileCheck %s

// Every op of dialects/optimizer.py parses, verifies and prints back in generic form
// (attributes sorted by name); the second RUN line parses the printed form again.

// CHECK-LABEL: func.func @sgd(
// CHECK-SAME:      %[[W:.*]]: tensor<3x4xf32>, %[[G:.*]]: tensor<3x4xf16>, %[[V:.*]]: tensor<3x4xf16>, %[[S:.*]]: tensor<f32>, %[[H:.*]]: tensor<f32>)
// CHECK-NEXT:    "ipu.sgd_step"(%[[W]], %[[G]], %[[H]], %[[H]], %[[H]]) : (tensor<3x4xf32>, tensor<3x4xf16>, tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<3x4xf32>
// CHECK-NEXT:    "ipu.sgd_momentum_step"(%[[W]], %[[G]], %[[V]], %[[S]], %[[H]], %[[H]], %[[H]], %[[H]], %[[H]], %[[H]]) {nesterov = true} : (tensor<3x4xf32>, tensor<3x4xf16>, tensor<3x4xf16>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<3x4xf32>, tensor<3x4xf16>, tensor<f32>)
func.func @sgd(%w: tensor<3x4xf32>, %g: tensor<3x4xf16>, %v: tensor<3x4xf16>, %s: tensor<f32>, %h: tensor<f32>) {
  %0 = "ipu.sgd_step"(%w, %g, %h, %h, %h) : (tensor<3x4xf32>, tensor<3x4xf16>, tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<3x4xf32>
  %1:3 = "ipu.sgd_momentum_step"(%w, %g, %v, %s, %h, %h, %h, %h, %h, %h) {nesterov = true} : (tensor<3x4xf32>, tensor<3x4xf16>, tensor<3x4xf16>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<3x4xf32>, tensor<3x4xf16>, tensor<f32>)
  return
}

// CHECK-LABEL: func.func @adam_lamb(
// CHECK-SAME:      %[[W:.*]]: tensor<5xf32>, %[[G:.*]]: tensor<5xf32>, %[[M:.*]]: tensor<5xf32>, %[[V:.*]]: tensor<5xf16>, %[[S:.*]]: tensor<f32>, %[[H:.*]]: tensor<f32>)
// CHECK-NEXT:    "ipu.adam_step"(%[[W]], %[[G]], %[[M]], %[[V]], %[[S]], %[[H]], %[[H]], %[[H]], %[[H]], %[[H]], %[[H]]) {bias_correction = true, decoupled = false} : (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf16>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf16>, tensor<f32>)
// CHECK-NEXT:    "ipu.lamb_step"(%[[W]], %[[G]], %[[M]], %[[V]], %[[S]], %[[H]], %[[H]], %[[H]], %[[H]], %[[H]], %[[H]], %[[H]]) {bias_correction = false} : (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf16>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf16>, tensor<f32>)
func.func @adam_lamb(%w: tensor<5xf32>, %g: tensor<5xf32>, %m: tensor<5xf32>, %v: tensor<5xf16>, %s: tensor<f32>, %h: tensor<f32>) {
  %0:4 = "ipu.adam_step"(%w, %g, %m, %v, %s, %h, %h, %h, %h, %h, %h) {decoupled = false, bias_correction = true} : (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf16>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf16>, tensor<f32>)
  %1:4 = "ipu.lamb_step"(%w, %g, %m, %v, %s, %h, %h, %h, %h, %h, %h, %h) {bias_correction = false} : (tensor<5xf32>, tensor<5xf32>, tensor<5xf32>, tensor<5xf16>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<5xf32>, tensor<5xf32>, tensor<5xf16>, tensor<f32>)
  return
}

// A state a flag switches off is a 0-d placeholder (here grad_avg, without centered).
// CHECK-LABEL: func.func @rmsprop(
// CHECK-SAME:      %[[W:.*]]: tensor<f32>, %[[G:.*]]: tensor<f32>, %[[A:.*]]: tensor<f32>, %[[P:.*]]: tensor<f32>, %[[S:.*]]: tensor<f32>, %[[H:.*]]: tensor<f32>)
// CHECK-NEXT:    "ipu.rmsprop_step"(%[[W]], %[[G]], %[[A]], %[[P]], %[[A]], %[[S]], %[[H]], %[[H]], %[[H]], %[[H]], %[[H]], %[[H]]) {centered = false, use_momentum = true, use_tf_variant = true} : (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
func.func @rmsprop(%w: tensor<f32>, %g: tensor<f32>, %a: tensor<f32>, %p: tensor<f32>, %s: tensor<f32>, %h: tensor<f32>) {
  %0:5 = "ipu.rmsprop_step"(%w, %g, %a, %p, %a, %s, %h, %h, %h, %h, %h, %h) {centered = false, use_momentum = true, use_tf_variant = true} : (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  return
}

// CHECK-LABEL: func.func @rmsprop_centered(
// CHECK-SAME:      %[[W:.*]]: tensor<2x2xf32>, %[[A:.*]]: tensor<2x2xf16>, %[[P:.*]]: tensor<f32>, %[[H:.*]]: tensor<f32>)
// CHECK-NEXT:    "ipu.rmsprop_step"(%[[W]], %[[W]], %[[A]], %[[A]], %[[P]], %[[H]], %[[H]], %[[H]], %[[H]], %[[H]], %[[H]], %[[H]]) {centered = true, use_momentum = false, use_tf_variant = false}
func.func @rmsprop_centered(%w: tensor<2x2xf32>, %a: tensor<2x2xf16>, %p: tensor<f32>, %h: tensor<f32>) {
  %0:5 = "ipu.rmsprop_step"(%w, %w, %a, %a, %p, %h, %h, %h, %h, %h, %h, %h) {centered = true, use_momentum = false, use_tf_variant = false} : (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf16>, tensor<2x2xf16>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<2x2xf32>, tensor<2x2xf16>, tensor<2x2xf16>, tensor<f32>, tensor<f32>)
  return
}
