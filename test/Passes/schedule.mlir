// RUN: ipu-opt %s --ipu-schedule=micro-batches=4 --split-input-file | FileCheck %s
// RUN: ipu-opt %s --pass-pipeline='builtin.module(ipu-schedule{strategy=pipelined micro-batches=4 schedule=1f1b})' \
// RUN:   --split-input-file | FileCheck %s --check-prefix=ONEF
// RUN: ipu-opt %s --pass-pipeline='builtin.module(ipu-schedule{strategy=sharded micro-batches=2})' \
// RUN:   --split-input-file | FileCheck %s --check-prefix=SHARD
// RUN: ipu-opt %s --pass-pipeline='builtin.module(ipu-schedule{strategy=phased micro-batches=2})' \
// RUN:   --split-input-file | FileCheck %s --check-prefix=PHASED

// The spec's 4-stage inference pipeline (Listing 4.8): blocks on IPUs 0-3,
// deviceIterations 4. Stage k runs micro-batch mb in slot mb + k: ramp-up, main, ramp-down
// as (stage call, micro-batch) pairs; each IPU holds one micro-batch at a time.
// CHECK-LABEL: func.func @inference
// CHECK-SAME:    attributes {ipu.in_flight = array<i64: 1, 1, 1, 1>, ipu.micro_batches = 4 : i64, ipu.schedule = "gpipe",
// CHECK-SAME:    ipu.tasks = array<i64: 0, 0, 0, 1, 1, 0, 0, 2, 1, 1, 2, 0, 0, 3, 1, 2, 2, 1, 3, 0, 1, 3, 2, 2, 3, 1, 2, 3, 3, 2, 3, 3>}
// In inference there is no backward to interleave: 1f1b is the same pipeline.
// ONEF-LABEL: func.func @inference
// ONEF-SAME:    attributes {ipu.in_flight = array<i64: 1, 1, 1, 1>, ipu.micro_batches = 4 : i64, ipu.schedule = "gpipe",
// ONEF-SAME:    ipu.tasks = array<i64: 0, 0, 0, 1, 1, 0, 0, 2, 1, 1, 2, 0, 0, 3, 1, 2, 2, 1, 3, 0, 1, 3, 2, 2, 3, 1, 2, 3, 3, 2, 3, 3>}
// ShardedExecution and the phased strategies: one micro-batch at a time through the
// stages in order.
// SHARD-LABEL: func.func @inference
// SHARD-SAME:    attributes {ipu.in_flight = array<i64: 1, 1, 1, 1>, ipu.micro_batches = 2 : i64, ipu.schedule = "sharded",
// SHARD-SAME:    ipu.tasks = array<i64: 0, 0, 1, 0, 2, 0, 3, 0, 0, 1, 1, 1, 2, 1, 3, 1>}
// PHASED-LABEL: func.func @inference
// PHASED-SAME:    attributes {ipu.in_flight = array<i64: 1, 1, 1, 1>, ipu.micro_batches = 2 : i64, ipu.schedule = "phased",
// PHASED-SAME:    ipu.tasks = array<i64: 0, 0, 1, 0, 2, 0, 3, 0, 0, 1, 1, 1, 2, 1, 3, 1>}
func.func @inference(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = call @b0(%x) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "ipu.copy"(%0) {src_ipu = 0 : i64, dst_ipu = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = call @b1(%1) {ipu.stage = #ipu.stage<1 : i64, 1 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %3 = "ipu.copy"(%2) {src_ipu = 1 : i64, dst_ipu = 2 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %4 = call @b2(%3) {ipu.stage = #ipu.stage<2 : i64, 2 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %5 = "ipu.copy"(%4) {src_ipu = 2 : i64, dst_ipu = 3 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %6 = call @b3(%5) {ipu.stage = #ipu.stage<3 : i64, 3 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %6 : tensor<4xf32>
}
func.func private @b0(%a: tensor<4xf32>) -> tensor<4xf32> attributes {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} {
  return %a : tensor<4xf32>
}
func.func private @b1(%a: tensor<4xf32>) -> tensor<4xf32> attributes {ipu.stage = #ipu.stage<1 : i64, 1 : i64>} {
  return %a : tensor<4xf32>
}
func.func private @b2(%a: tensor<4xf32>) -> tensor<4xf32> attributes {ipu.stage = #ipu.stage<2 : i64, 2 : i64>} {
  return %a : tensor<4xf32>
}
func.func private @b3(%a: tensor<4xf32>) -> tensor<4xf32> attributes {ipu.stage = #ipu.stage<3 : i64, 3 : i64>} {
  return %a : tensor<4xf32>
}

// -----

// Training on 2 IPUs, as ipu-outline-stages and ipu-insert-copies leave it: forward
// stage 0 (IPU 0), the fused stage 1 (IPU 1), backward stage 2 (IPU 0); 2N-1 = 3
// stages, gradientAccumulation 4.
// gpipe: every forward (slots mb and mb + 1) before any backward of stage 0 (slots
// 5..8); IPU 0 then holds all 4 micro-batches at once.
// CHECK-LABEL: func.func @training
// CHECK-SAME:    attributes {ipu.in_flight = array<i64: 4, 1>, ipu.micro_batches = 4 : i64, ipu.schedule = "gpipe",
// CHECK-SAME:    ipu.tasks = array<i64: 0, 0, 0, 1, 1, 0, 0, 2, 1, 1, 0, 3, 1, 2, 1, 3, 2, 0, 2, 1, 2, 2, 2, 3>}
// 1f1b: the backward of micro-batch mb runs in slot mb + 2, interleaved with the
// forwards; IPU 0 holds at most 3 micro-batches (the pipeline depth).
// ONEF-LABEL: func.func @training
// ONEF-SAME:    attributes {ipu.in_flight = array<i64: 3, 1>, ipu.micro_batches = 4 : i64, ipu.schedule = "1f1b",
// ONEF-SAME:    ipu.tasks = array<i64: 0, 0, 0, 1, 1, 0, 0, 2, 1, 1, 2, 0, 0, 3, 1, 2, 2, 1, 1, 3, 2, 2, 2, 3>}
// SHARD-LABEL: func.func @training
// SHARD-SAME:    attributes {ipu.in_flight = array<i64: 1, 1>, ipu.micro_batches = 2 : i64, ipu.schedule = "sharded",
// SHARD-SAME:    ipu.tasks = array<i64: 0, 0, 1, 0, 2, 0, 0, 1, 1, 1, 2, 1>}
func.func @training(%x: tensor<4xf32>, %w: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = call @training_stage0(%x, %w) {ipu.kind = "forward", ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "ipu.copy"(%0) {dst_ipu = 1 : i64, src_ipu = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %2:2 = call @training_stage1(%1) {ipu.kind = "forward_backward", ipu.stage = #ipu.stage<1 : i64, 1 : i64>} : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  %3 = "ipu.copy"(%2#1) {dst_ipu = 0 : i64, src_ipu = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %4 = call @training_stage2(%3, %x) {ipu.kind = "backward", ipu.stage = #ipu.stage<2 : i64, 0 : i64>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %2#0, %4 : tensor<4xf32>, tensor<4xf32>
}
func.func private @training_stage0(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> attributes {ipu.kind = "forward", ipu.stage = #ipu.stage<0 : i64, 0 : i64>} {
  %0 = "ipu.mul"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func private @training_stage1(%a: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) attributes {ipu.kind = "forward_backward", ipu.stage = #ipu.stage<1 : i64, 1 : i64>} {
  %0 = "ipu.relu"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "ipu.mul"(%0, %a) {ipu.backward = true} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}
func.func private @training_stage2(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> attributes {ipu.kind = "backward", ipu.stage = #ipu.stage<2 : i64, 0 : i64>} {
  %0 = "ipu.mul"(%a, %b) {ipu.backward = true} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A function without stage calls gets no schedule.
// CHECK-LABEL: func.func @no_stages(%arg0: tensor<4xf32>) -> tensor<4xf32> {
// SHARD-LABEL: func.func @no_stages(%arg0: tensor<4xf32>) -> tensor<4xf32> {
func.func @no_stages(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.relu"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
