// RUN: ipu-opt %s --ipu-recompute --split-input-file | FileCheck %s --check-prefix=PIPELINE
// RUN: ipu-opt %s --ipu-recompute=fused-stage=true --split-input-file | FileCheck %s
// RUN: ipu-opt %s --pass-pipeline='builtin.module(ipu-recompute{fused-stage})' \
// RUN:   --split-input-file | FileCheck %s
// RUN: not ipu-opt %s --ipu-recompute=fused-stage=maybe --split-input-file -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BAD
// BAD: option 'fused-stage' of pass 'ipu-recompute' expects a boolean (true/false), got 'maybe'

// One stage on IPU 0 (a model that is not pipelined: the last forward stage is fused
// with its backward). Pipeline recomputation leaves it alone. With fused-stage
// (RecomputeAll) the backward reads the tanh activations that compute the checkpoints
// %c and %d recomputed, from %c and from the program's input, just before their first
// backward use, and reuses each clone for later uses. The checkpoints are kept, and so
// is the exp after the last one (PopART's allCheckpointAfterLastCheckpoint).
// PIPELINE-LABEL: func.func @single_stage
// PIPELINE-NOT:   ipu.recomputed
// CHECK-LABEL: func.func @single_stage
// CHECK:         %[[A:.*]] = "ipu.tanh"(%arg0) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    %[[C:.*]] = "ipu.nop"(%[[A]]) {ipu.checkpoint, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    %[[B:.*]] = "ipu.tanh"(%[[C]]) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    %[[D:.*]] = "ipu.nop"(%[[B]]) {ipu.checkpoint, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    %[[Y:.*]] = "ipu.exp"(%[[D]]) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    %[[G1:.*]] = "ipu.mul"(%[[Y]], %[[Y]]) {ipu.backward, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    %[[RB:.*]] = "ipu.tanh"(%[[C]]) {ipu.backward, ipu.recomputed, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    %[[G0:.*]] = "ipu.mul"(%[[G1]], %[[RB]]) {ipu.backward, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    %[[RA:.*]] = "ipu.tanh"(%arg0) {ipu.backward, ipu.recomputed, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    %[[G2:.*]] = "ipu.mul"(%[[G0]], %[[RA]]) {ipu.backward, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    "ipu.mul"(%[[G2]], %[[RB]]) {ipu.backward, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
func.func @single_stage(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "ipu.tanh"(%x) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %c = "ipu.nop"(%0) {ipu.checkpoint, ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "ipu.tanh"(%c) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %d = "ipu.nop"(%1) {ipu.checkpoint, ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %y = "ipu.exp"(%d) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %g1 = "ipu.mul"(%y, %y) {ipu.backward, ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %g0 = "ipu.mul"(%g1, %1) {ipu.backward, ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %g2 = "ipu.mul"(%g0, %0) {ipu.backward, ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %gx = "ipu.mul"(%g2, %1) {ipu.backward, ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y, %gx : tensor<4xf32>, tensor<4xf32>
}

// -----

// Without checkpoints every op is after the last one: RecomputeAll recomputes nothing,
// as in PopART.
// CHECK-LABEL: func.func @no_checkpoints
// CHECK-NOT:     ipu.recomputed
func.func @no_checkpoints(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "ipu.tanh"(%x) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %y = "ipu.exp"(%0) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %g1 = "ipu.mul"(%y, %0) {ipu.backward, ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %y, %g1 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Two stages: fused-stage recomputes in the last stage (1) as well as in stage 0. The
// last stage's backward reads stage 0's activation %b as it is (values of other stages
// arrive as the stage's inputs and are never recomputed there) and the exp computing
// its checkpoint recomputed from it.
// PIPELINE-LABEL: func.func @two_stages
// PIPELINE-NOT:     "ipu.exp"{{.*}}ipu.recomputed
// CHECK-LABEL: func.func @two_stages
// CHECK:         %[[B:.*]] = "ipu.tanh"(%arg0) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    %[[Y:.*]] = "ipu.exp"(%[[B]]) {ipu.stage = #ipu.stage<1 : i64, 1 : i64>}
// CHECK-NEXT:    %[[C:.*]] = "ipu.nop"(%[[Y]]) {ipu.checkpoint, ipu.stage = #ipu.stage<1 : i64, 1 : i64>}
// CHECK-NEXT:    %[[Z:.*]] = "ipu.sin"(%[[C]]) {ipu.stage = #ipu.stage<1 : i64, 1 : i64>}
// CHECK-NEXT:    %[[RY:.*]] = "ipu.exp"(%[[B]]) {ipu.backward, ipu.recomputed, ipu.stage = #ipu.stage<1 : i64, 1 : i64>}
// CHECK-NEXT:    %[[G1:.*]] = "ipu.mul"(%[[RY]], %[[B]]) {ipu.backward, ipu.stage = #ipu.stage<1 : i64, 1 : i64>}
// CHECK-NEXT:    %[[RB:.*]] = "ipu.tanh"(%arg0) {ipu.backward, ipu.recomputed, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    "ipu.mul"(%[[G1]], %[[RB]]) {ipu.backward, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
func.func @two_stages(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %b = "ipu.tanh"(%x) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %y = "ipu.exp"(%b) {ipu.stage = #ipu.stage<1 : i64, 1 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %c = "ipu.nop"(%y) {ipu.checkpoint, ipu.stage = #ipu.stage<1 : i64, 1 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %z = "ipu.sin"(%c) {ipu.stage = #ipu.stage<1 : i64, 1 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %g1 = "ipu.mul"(%y, %b) {ipu.backward, ipu.stage = #ipu.stage<1 : i64, 1 : i64>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %gx = "ipu.mul"(%g1, %b) {ipu.backward, ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %z, %gx : tensor<4xf32>, tensor<4xf32>
}
