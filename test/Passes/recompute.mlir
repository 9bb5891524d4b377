// RUN: ipu-opt %s --ipu-recompute --split-input-file | FileCheck %s
// RUN: ipu-opt %s --ipu-recompute --ipu-outline-stages --split-input-file \
// RUN:   | FileCheck %s --check-prefix=OUTLINE

// Two forward stages on IPUs 0, 1; the backward of stage 0 reads tanh activations %1
// (after the checkpoint %c) and %0: it recomputes %1 from the checkpoint, and %0 from
// the stage input %x, instead of stashing them. The fused last stage is left alone.
// CHECK-LABEL: func.func @train
// CHECK:         %[[A:.*]] = "ipu.tanh"(%arg0) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    %[[C:.*]] = "ipu.nop"(%[[A]]) {ipu.checkpoint, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    %[[B:.*]] = "ipu.tanh"(%[[C]]) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    %[[Y:.*]] = "ipu.exp"(%[[B]]) {ipu.stage = #ipu.stage<1 : i64, 1 : i64>}
// CHECK-NEXT:    %[[G1:.*]] = "ipu.mul"(%[[Y]], %[[B]]) {ipu.backward, ipu.stage = #ipu.stage<1 : i64, 1 : i64>}
// CHECK-NEXT:    %[[RB:.*]] = "ipu.tanh"(%[[C]]) {ipu.backward, ipu.recomputed, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    %[[G0:.*]] = "ipu.mul"(%[[G1]], %[[RB]]) {ipu.backward, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    %[[RA:.*]] = "ipu.tanh"(%arg0) {ipu.backward, ipu.recomputed, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    "ipu.mul"(%[[G0]], %[[RA]]) {ipu.backward, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// The backward stage now takes the checkpoint and the input, not the activations.
// OUTLINE:       %0:2 = call @train_stage0(%arg0) {ipu.kind = "forward"
// OUTLINE:       call @train_stage2(%0#0, %1#1, %arg0) {ipu.kind = "backward"
// OUTLINE-LABEL: func.func private @train_stage0
// OUTLINE:         return %1, %2
func.func @train(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "ipu.tanh"(%x) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %c = "ipu.nop"(%0) {ipu.checkpoint, ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "ipu.tanh"(%c) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %y = "ipu.exp"(%1) {ipu.stage = #ipu.stage<1 : i64, 1 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %g1 = "ipu.mul"(%y, %1) {ipu.backward, ipu.stage = #ipu.stage<1 : i64, 1 : i64>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %g0 = "ipu.mul"(%g1, %1) {ipu.backward, ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %gx = "ipu.mul"(%g0, %0) {ipu.backward, ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y, %gx : tensor<4xf32>, tensor<4xf32>
}

// -----

// Inference (no backward ops): nothing changes.
// CHECK-LABEL: func.func @inference
// CHECK-NEXT:    "ipu.tanh"(%arg0) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    return
func.func @inference(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.tanh"(%x) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
