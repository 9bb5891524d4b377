// RUN: ipu-opt %s --ipu-schedule=micro-batches=2 --split-input-file --verify-diagnostics
// RUN: not ipu-opt %s --pass-pipeline='builtin.module(ipu-schedule{strategy=overlapped micro-batches=4})' \
// RUN:   --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=STRATEGY
// RUN: not ipu-opt %s --pass-pipeline='builtin.module(ipu-schedule{schedule=interleaved micro-batches=4})' \
// RUN:   --split-input-file -o /dev/null 2>&1 | FileCheck %s --check-prefix=SCHEDULE
// RUN: not ipu-opt %s --ipu-schedule=micro-batches=0 --split-input-file -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=ZERO
// RUN: not ipu-opt %s --ipu-schedule=micro-batches=65537 --split-input-file -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=MANY

// STRATEGY: error: strategy must be one of pipelined, sharded, phased, got 'overlapped'
// SCHEDULE: error: schedule must be gpipe or 1f1b, got 'interleaved'
// ZERO: error: micro-batches must be at least 1, got 0
// More micro-batches than the schedule materialises (schedule.MAX_MICRO_BATCHES), named
// as the user sets them: deviceIterations in inference, gradientAccumulation in training.
// MANY: schedule-invalid.mlir:[[# @LINE + 5]]:1: error: deviceIterations (65537) must be at most 65536 for a model split into stages: the schedule orders every micro-batch of every stage; set Options.deviceIterations(65536) or less
// MANY: schedule-invalid.mlir:{{[0-9]+}}:1: error: gradientAccumulation (65537) must be at most 65536 for a model split into stages: the schedule orders every micro-batch of every stage; set Options.Training.gradientAccumulation(65536) or less

// A 4-stage inference pipeline needs deviceIterations >= 4 (first RUN line: 2).
// expected-error @+1 {{deviceIterations (2) must be at least the number of pipeline stages (4) in inference; set Options.deviceIterations(4) or more}}
func.func @inference(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = call @b0(%x) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = call @b1(%0) {ipu.stage = #ipu.stage<1 : i64, 1 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = call @b2(%1) {ipu.stage = #ipu.stage<2 : i64, 2 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %3 = call @b3(%2) {ipu.stage = #ipu.stage<3 : i64, 3 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %3 : tensor<4xf32>
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

// Training with N = 2 forward stages: 2N-1 = 3 stages counting the fused one and the
// backward one, so gradientAccumulation(2) is too small.
// expected-error @+1 {{gradientAccumulation (2) must be at least the number of pipeline stages counting backward, 2N-1 = 3 for N = 2 forward stages; set Options.Training.gradientAccumulation(3) or more}}
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
