// RUN: ipu-opt %s --ipu-outline-stages --split-input-file | FileCheck %s
// RUN: ipu-opt %s --ipu-outline-stages=separate-backward=true --split-input-file \
// RUN:   | FileCheck %s --check-prefix=SEP

// Inference, two stages on IPUs 0 and 1. The constant %c is used by both stages and is
// cloned into each; the unused constant %u is erased; %1 crosses from stage 0 to stage
// 1 and is also returned, so it is a result of the first call used twice.
// CHECK-LABEL: func.func @inference
// CHECK-SAME:      (%[[X:.*]]: tensor<4xf32>)
// CHECK-NOT:     ipu.constant
// CHECK:         %[[S0:.*]] = call @inference_stage0(%[[X]]) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[S1:.*]] = call @inference_stage1(%[[S0]]) {ipu.stage = #ipu.stage<1 : i64, 1 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    return %[[S0]], %[[S1]] : tensor<4xf32>, tensor<4xf32>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @inference_stage0(%[[A:.*]]: tensor<4xf32>) -> tensor<4xf32> attributes {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} {
// CHECK-NEXT:    %[[C:.*]] = "ipu.constant"() {value = dense<1.000000e+00> : tensor<4xf32>}
// CHECK-NEXT:    %[[ADD:.*]] = "ipu.add"(%[[A]], %[[C]]) {ipu.block = "A", ipu.ipu_id = 0 : i64} :
// CHECK-NEXT:    %[[RELU:.*]] = "ipu.relu"(%[[ADD]]) {ipu.block = "A", ipu.ipu_id = 0 : i64} :
// CHECK-NEXT:    return %[[RELU]] : tensor<4xf32>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @inference_stage1(%[[B:.*]]: tensor<4xf32>) -> tensor<4xf32> attributes {ipu.stage = #ipu.stage<1 : i64, 1 : i64>} {
// CHECK-NEXT:    %[[C1:.*]] = "ipu.constant"() {value = dense<1.000000e+00> : tensor<4xf32>}
// CHECK-NEXT:    %[[MUL:.*]] = "ipu.mul"(%[[B]], %[[C1]]) {ipu.block = "B", ipu.ipu_id = 1 : i64} :
// CHECK-NEXT:    return %[[MUL]] : tensor<4xf32>
// CHECK-NEXT:  }
// CHECK-NOT:   dense<2.000000e+00>
func.func @inference(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %c = "ipu.constant"() {value = dense<1.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %u = "ipu.constant"() {value = dense<2.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %0 = "ipu.add"(%x, %c) {ipu.block = "A", ipu.ipu_id = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "ipu.relu"(%0) {ipu.block = "A", ipu.ipu_id = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "ipu.mul"(%1, %c) {ipu.block = "B", ipu.ipu_id = 1 : i64, ipu.stage = #ipu.stage<1 : i64, 1 : i64>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %1, %2 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Training, forward stages 0 (IPU 0) and 1 (IPU 1), L = 1. The backward of stage s is
// stage 2L - s: the backward of stage 1 joins forward stage 1 in one fused
// "forward_backward" stage, the backward of stage 0 is stage 2, back on IPU 0.
// With separate-backward (SEP) it is 2L + 1 - s: stages 2 (IPU 1) and 3 (IPU 0).
// CHECK-LABEL: func.func @training
// CHECK-SAME:      (%[[X:.*]]: tensor<4xf32>, %[[W:.*]]: tensor<4xf32>)
// CHECK-NEXT:    %[[F0:.*]] = call @training_stage0(%[[X]], %[[W]]) {ipu.kind = "forward", ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    %[[F1:.*]]:2 = call @training_stage1(%[[F0]]) {ipu.kind = "forward_backward", ipu.stage = #ipu.stage<1 : i64, 1 : i64>} : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
// CHECK-NEXT:    %[[B0:.*]] = call @training_stage2(%[[F1]]#1, %[[X]]) {ipu.kind = "backward", ipu.stage = #ipu.stage<2 : i64, 0 : i64>}
// CHECK-NEXT:    return %[[F1]]#0, %[[B0]]
// CHECK:       func.func private @training_stage0({{.*}}) -> tensor<4xf32> attributes {ipu.kind = "forward", ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    "ipu.mul"
// CHECK-NEXT:    return
// CHECK:       func.func private @training_stage1(%[[H:.*]]: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) attributes {ipu.kind = "forward_backward", ipu.stage = #ipu.stage<1 : i64, 1 : i64>}
// CHECK-NEXT:    %[[R:.*]] = "ipu.relu"(%[[H]])
// CHECK-NEXT:    %[[G:.*]] = "ipu.mul"(%[[R]], %[[H]]) {ipu.backward = true}
// CHECK-NEXT:    return %[[R]], %[[G]]
// CHECK:       func.func private @training_stage2({{.*}}) -> tensor<4xf32> attributes {ipu.kind = "backward", ipu.stage = #ipu.stage<2 : i64, 0 : i64>}
// CHECK-NEXT:    "ipu.mul"({{.*}}) {ipu.backward = true}
// CHECK-NEXT:    return

// SEP-LABEL: func.func @training
// SEP-SAME:      (%[[X:.*]]: tensor<4xf32>, %[[W:.*]]: tensor<4xf32>)
// SEP-NEXT:    %[[F0:.*]] = call @training_stage0(%[[X]], %[[W]]) {ipu.kind = "forward", ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// SEP-NEXT:    %[[F1:.*]] = call @training_stage1(%[[F0]]) {ipu.kind = "forward", ipu.stage = #ipu.stage<1 : i64, 1 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
// SEP-NEXT:    %[[B1:.*]] = call @training_stage2(%[[F1]], %[[F0]]) {ipu.kind = "backward", ipu.stage = #ipu.stage<2 : i64, 1 : i64>}
// SEP-NEXT:    %[[B0:.*]] = call @training_stage3(%[[B1]], %[[X]]) {ipu.kind = "backward", ipu.stage = #ipu.stage<3 : i64, 0 : i64>}
// SEP-NEXT:    return %[[F1]], %[[B0]]
// SEP:       func.func private @training_stage1({{.*}}) -> tensor<4xf32> attributes {ipu.kind = "forward", ipu.stage = #ipu.stage<1 : i64, 1 : i64>}
// SEP-NEXT:    "ipu.relu"
// SEP-NEXT:    return
// SEP:       func.func private @training_stage2({{.*}}) -> tensor<4xf32> attributes {ipu.kind = "backward", ipu.stage = #ipu.stage<2 : i64, 1 : i64>}
// SEP:       func.func private @training_stage3({{.*}}) -> tensor<4xf32> attributes {ipu.kind = "backward", ipu.stage = #ipu.stage<3 : i64, 0 : i64>}
func.func @training(%x: tensor<4xf32>, %w: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "ipu.mul"(%x, %w) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "ipu.relu"(%0) {ipu.stage = #ipu.stage<1 : i64, 1 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "ipu.mul"(%1, %0) {ipu.backward = true, ipu.stage = #ipu.stage<1 : i64, 1 : i64>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = "ipu.mul"(%2, %x) {ipu.backward = true, ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %1, %3 : tensor<4xf32>, tensor<4xf32>
}

// -----

// ipu.phase (from a phased Stage) goes onto the call and the stage function.
// CHECK-LABEL: func.func @phased
// CHECK-NEXT:    call @phased_stage0(%{{.*}}) {ipu.phase = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    call @phased_stage1(%{{.*}}) {ipu.phase = 1 : i64, ipu.stage = #ipu.stage<1 : i64, 0 : i64>}
// CHECK:       func.func private @phased_stage0({{.*}}) -> tensor<4xf32> attributes {ipu.phase = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK:       func.func private @phased_stage1({{.*}}) -> tensor<4xf32> attributes {ipu.phase = 1 : i64, ipu.stage = #ipu.stage<1 : i64, 0 : i64>}
func.func @phased(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.relu"(%x) {ipu.phase = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "ipu.exp"(%0) {ipu.phase = 1 : i64, ipu.stage = #ipu.stage<1 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// Two stages with the same number on different IPUs: the names carry the IPU.
// CHECK-LABEL: func.func @same_stage
// CHECK-NEXT:    call @same_stage_stage0_ipu0(%{{.*}}) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    call @same_stage_stage0_ipu1(%{{.*}}) {ipu.stage = #ipu.stage<0 : i64, 1 : i64>}
func.func @same_stage(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "ipu.relu"(%x) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "ipu.exp"(%x) {ipu.stage = #ipu.stage<0 : i64, 1 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// A function without stages is left as it is, constants included, even beside a
// staged one.
// CHECK-LABEL: func.func @no_stages
// CHECK-NEXT:    %[[C:.*]] = "ipu.constant"() {value = dense<1.000000e+00> : tensor<4xf32>}
// CHECK-NEXT:    %[[R:.*]] = "ipu.add"(%arg0, %[[C]]) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    return %[[R]]
// CHECK-LABEL: func.func @staged
// CHECK-NEXT:    call @staged_stage0
func.func @no_stages(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = "ipu.constant"() {value = dense<1.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %0 = "ipu.add"(%x, %c) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func @staged(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.relu"(%x) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
