// RUN: ipu-opt %s --ipu-outline-stages --split-input-file --verify-diagnostics

// Blocks "1" and "2" placed on IPUs 1 and 0 with AutoStage.SameAsIpu (spec 4.4.2):
// block "2" runs in stage 0 but uses what block "1" computes in stage 1.
func.func @later_to_earlier(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.relu"(%x) {ipu.block = "1", ipu.stage = #ipu.stage<1 : i64, 1 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  // expected-error @+1 {{'ipu.exp' in stage 0 (block '2', IPU 0) uses a value computed later, in stage 1 on IPU 1; stage ids must ascend in program order: give this block a later stage (for example with AutoStage.AutoIncrement)}}
  %1 = "ipu.exp"(%0) {ipu.block = "2", ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// Every computing op of a staged function needs a stage (constants excepted).
func.func @unstaged_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.relu"(%x) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  // expected-error @+1 {{'ipu.exp' has no ipu.stage while other ops of @unstaged_op have one; run ipu-assign-stages first}}
  %1 = "ipu.exp"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
