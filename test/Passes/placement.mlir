// Every op a pass creates keeps the placement of what it replaces: each pass, then
// ipu-verify-placement, on placed input.
// RUN: ipu-opt %s --split-input-file --ipu-simplify --ipu-verify-placement | FileCheck %s --check-prefix=SIMPLIFY
// RUN: ipu-opt %s --split-input-file --ipu-narrow-f64 --ipu-verify-placement | FileCheck %s --check-prefix=NARROW
// RUN: ipu-opt %s --split-input-file --pass-pipeline='builtin.module(ipu-assign-stages, ipu-verify-placement, ipu-recompute, ipu-verify-placement, ipu-outline-stages, ipu-verify-placement, ipu-insert-copies, ipu-verify-placement, ipu-schedule{micro-batches=4}, ipu-verify-placement)' \
// RUN:   | FileCheck %s --check-prefix=PIPELINE
// RUN: ipu-opt %s --split-input-file --pass-pipeline='builtin.module(ipu-assign-stages{stages=A=0:0:0,B=1:1:1}, ipu-outline-stages{pipelined=false}, ipu-insert-copies, ipu-schedule-phases{liveness=off-chip-after-each-phase}, ipu-verify-placement, ipu-schedule{strategy=phased micro-batches=2}, ipu-verify-placement)' \
// RUN:   | FileCheck %s --check-prefix=PHASED

// Batch norm's decomposition unsqueezes one dim at a time: the merged reshape, the merged
// permute and a reshape moved below a unary op keep the block and IPU.
// SIMPLIFY-LABEL: func.func @chains
// SIMPLIFY-NEXT:    %[[R:.*]] = "ipu.reshape"(%arg0) {ipu.block = "A", ipu.ipu_id = 0 : i64} : (tensor<4xf32>) -> tensor<4x1x1xf32>
// SIMPLIFY-NEXT:    %[[P:.*]] = "ipu.permute"(%arg1) {dims = array<i64: 2, 0, 1>, ipu.block = "B", ipu.ipu_id = 1 : i64} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
// SIMPLIFY-NEXT:    %[[E:.*]] = "ipu.exp"(%arg0) {ipu.block = "B", ipu.ipu_id = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
// SIMPLIFY-NEXT:    %[[M:.*]] = "ipu.reshape"(%[[E]]) {ipu.block = "B", ipu.ipu_id = 1 : i64} : (tensor<4xf32>) -> tensor<2x2xf32>
// SIMPLIFY-NEXT:    return %[[R]], %[[P]], %[[M]]
// NARROW-LABEL: func.func @chains
func.func @chains(%a: tensor<4xf32>, %b: tensor<2x3x4xf32>) -> (tensor<4x1x1xf32>, tensor<4x2x3xf32>, tensor<2x2xf32>) {
  %0 = "ipu.reshape"(%a) {ipu.block = "A", ipu.ipu_id = 0 : i64} : (tensor<4xf32>) -> tensor<4x1xf32>
  %1 = "ipu.reshape"(%0) {ipu.block = "A", ipu.ipu_id = 0 : i64} : (tensor<4x1xf32>) -> tensor<4x1x1xf32>
  %2 = "ipu.permute"(%b) {dims = array<i64: 1, 2, 0>, ipu.block = "B", ipu.ipu_id = 1 : i64} : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
  %3 = "ipu.permute"(%2) {dims = array<i64: 1, 2, 0>, ipu.block = "B", ipu.ipu_id = 1 : i64} : (tensor<3x4x2xf32>) -> tensor<4x2x3xf32>
  %4 = "ipu.reshape"(%a) {ipu.block = "B", ipu.ipu_id = 1 : i64} : (tensor<4xf32>) -> tensor<2x2xf32>
  %5 = "ipu.exp"(%4) {ipu.block = "B", ipu.ipu_id = 1 : i64} : (tensor<2x2xf32>) -> tensor<2x2xf32>
  return %1, %3, %5 : tensor<4x1x1xf32>, tensor<4x2x3xf32>, tensor<2x2xf32>
}

// -----

// Training over two IPUs: a backward constant that canonicalize hoisted to the top, in
// block A, is cloned into the stage of B that reads it; the block order is that of the
// forward ops, not of the hoisted constant; the unannotated backward max joins the
// block of its last computing producer (B's select), not the constant's; copies are
// placed in their consumer's stage.
// PIPELINE-LABEL: func.func @train
// PIPELINE:         call @train_stage0
// PIPELINE-NEXT:    "ipu.copy"({{.*}}) {dst_ipu = 1 : i64, ipu.stage = #ipu.stage<1 : i64, 1 : i64>, src_ipu = 0 : i64}
// PIPELINE-NEXT:    call @train_stage1
// PIPELINE-NEXT:    "ipu.copy"({{.*}}) {dst_ipu = 0 : i64, ipu.stage = #ipu.stage<2 : i64, 0 : i64>, src_ipu = 1 : i64}
// PIPELINE-NEXT:    call @train_stage2
// PIPELINE-LABEL: func.func private @train_stage1
// PIPELINE-NEXT:    %[[ZERO:.*]] = "ipu.constant"() {{{.*}}value = dense<0.000000e+00> : tensor<f32>}
// PIPELINE:         %[[SELECT:.*]] = "ipu.select"
// PIPELINE-NEXT:    "ipu.max"(%[[SELECT]], %[[ZERO]]) {ipu.backward = true}
// PIPELINE-LABEL: func.func private @train_stage2
// PIPELINE-NEXT:    "ipu.mul"
// PHASED-LABEL: func.func @train
// PHASED:         "ipu.remote_load"(%arg0) {ipu = 0 : i64, ipu.phase = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// PHASED:         "ipu.remote_store"({{.*}}) {ipu = 0 : i64, ipu.phase = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
func.func @train(%x: tensor<4xf32>, %w: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %zero = "ipu.constant"() {ipu.backward = true, ipu.block = "A", value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %0 = "ipu.mul"(%x, %w) {ipu.block = "A", ipu.ipu_id = 0 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "ipu.relu"(%0) {ipu.block = "B", ipu.ipu_id = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "ipu.le"(%0, %zero) {ipu.backward = true, ipu.block = "B", ipu.ipu_id = 1 : i64} : (tensor<4xf32>, tensor<f32>) -> tensor<4xi1>
  %3 = "ipu.select"(%2, %zero, %1) {ipu.backward = true, ipu.block = "B", ipu.ipu_id = 1 : i64} : (tensor<4xi1>, tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  %4 = "ipu.max"(%3, %zero) {ipu.backward = true} : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %5 = "ipu.mul"(%4, %x) {ipu.backward = true, ipu.block = "A", ipu.ipu_id = 0 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %1, %5 : tensor<4xf32>, tensor<4xf32>
}
