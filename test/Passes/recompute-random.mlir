// RUN: ipu-opt %s --ipu-recompute --split-input-file | FileCheck %s

// Dropout on stage 0 (IPU 0): the backward of stage 0 reads the mask %m. The draw is
// recomputed like any forward op, and the forward draw and its clone share a seed
// modifier, so the JIT draws the same mask twice (PopART's recomputed dropout) instead
// of stashing it. The constant threshold is a weight: it is read, not cloned.
// CHECK-LABEL: func.func @dropout
// CHECK:         %[[P:.*]] = "ipu.constant"()
// CHECK-NEXT:    %[[R:.*]] = "ipu.random_uniform"() {high = 1.000000e+00 : f64, ipu.seed_modifier = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>, low = 0.000000e+00 : f64}
// CHECK-NEXT:    %[[K:.*]] = "ipu.gt"(%[[R]], %[[P]]) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    %[[M:.*]] = "ipu.select"(%[[K]], %[[P]], %[[R]]) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    %[[Y:.*]] = "ipu.mul"(%arg0, %[[M]]) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    %[[Z:.*]] = "ipu.exp"(%[[Y]]) {ipu.stage = #ipu.stage<1 : i64, 1 : i64>}
// CHECK-NEXT:    %[[G1:.*]] = "ipu.mul"(%[[Z]], %[[Z]]) {ipu.backward, ipu.stage = #ipu.stage<1 : i64, 1 : i64>}
// CHECK-NEXT:    %[[RR:.*]] = "ipu.random_uniform"() {high = 1.000000e+00 : f64, ipu.backward, ipu.recomputed, ipu.seed_modifier = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>, low = 0.000000e+00 : f64}
// CHECK-NEXT:    %[[RK:.*]] = "ipu.gt"(%[[RR]], %[[P]]) {ipu.backward, ipu.recomputed, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    %[[RM:.*]] = "ipu.select"(%[[RK]], %[[P]], %[[RR]]) {ipu.backward, ipu.recomputed, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    "ipu.mul"(%[[G1]], %[[RM]]) {ipu.backward, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
func.func @dropout(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %p = "ipu.constant"() {value = dense<0.5> : tensor<4xf32>, ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : () -> tensor<4xf32>
  %r = "ipu.random_uniform"() {low = 0.0 : f64, high = 1.0 : f64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : () -> tensor<4xf32>
  %k = "ipu.gt"(%r, %p) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  %m = "ipu.select"(%k, %p, %r) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y = "ipu.mul"(%x, %m) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %z = "ipu.exp"(%y) {ipu.stage = #ipu.stage<1 : i64, 1 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %g1 = "ipu.mul"(%z, %z) {ipu.backward, ipu.stage = #ipu.stage<1 : i64, 1 : i64>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %gx = "ipu.mul"(%g1, %m) {ipu.backward, ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %z, %gx : tensor<4xf32>, tensor<4xf32>
}

// -----

// Two draws recomputed in one function take different modifiers; one already given a
// modifier keeps it and the next is numbered after it.
// CHECK-LABEL: func.func @two_draws
// CHECK:         "ipu.random_normal"() {{{.*}}ipu.seed_modifier = 7 : i64
// CHECK-NEXT:    "ipu.random_uniform"() {{{.*}}ipu.seed_modifier = 8 : i64
// CHECK:         "ipu.random_normal"() {{{.*}}ipu.recomputed, ipu.seed_modifier = 7 : i64
// CHECK:         "ipu.random_uniform"() {{{.*}}ipu.recomputed, ipu.seed_modifier = 8 : i64
func.func @two_draws(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = "ipu.random_normal"() {mean = 0.0 : f64, std = 1.0 : f64, ipu.seed_modifier = 7 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : () -> tensor<4xf32>
  %b = "ipu.random_uniform"() {low = 0.0 : f64, high = 1.0 : f64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : () -> tensor<4xf32>
  %s = "ipu.add"(%a, %b) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %y = "ipu.mul"(%x, %s) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %z = "ipu.exp"(%y) {ipu.stage = #ipu.stage<1 : i64, 1 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %g1 = "ipu.mul"(%z, %z) {ipu.backward, ipu.stage = #ipu.stage<1 : i64, 1 : i64>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %gx = "ipu.mul"(%g1, %a) {ipu.backward, ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %gy = "ipu.mul"(%gx, %b) {ipu.backward, ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %z, %gy : tensor<4xf32>, tensor<4xf32>
}
