// RUN: ipu-opt %s --ipu-assign-stages --split-input-file --verify-diagnostics
// RUN: not ipu-opt %s --ipu-assign-stages=stages=A=0:0,C=1:1 --split-input-file -o /dev/null 2>&1 \
// RUN:   | FileCheck %s --check-prefix=STAGE

// Blocks "1" then "2" on IPUs 1, 0 (spec 4.4.2): stage ids would descend.
func.func @not_ascending(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.relu"(%x) {ipu.block = "1", ipu.ipu_id = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  // expected-error @+1 {{stage ids must ascend in PipelinedExecution: block '2' (stage 0) runs after block '1' (stage 1); use AutoStage.AutoIncrement or give later blocks higher stages}}
  %1 = "ipu.exp"(%0) {ipu.block = "2", ipu.ipu_id = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// Once blocks are used, every layer must be in one.
func.func @outside_blocks(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.relu"(%x) {ipu.block = "A", ipu.ipu_id = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  // expected-error @+1 {{'ipu.exp' is outside every Block; once a model uses blocks, put every layer inside a poptorch.Block or after a poptorch.BeginBlock}}
  %1 = "ipu.exp"(%0) : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// A Stage naming a block that does not exist (second RUN line).
// STAGE: error: Unknown Block 'C': a Stage names it, but it does not exist; the model's blocks are A, B
func.func @unknown_block(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.relu"(%x) {ipu.block = "A", ipu.ipu_id = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  // expected-error @+1 {{stage ids must ascend}}
  %1 = "ipu.exp"(%0) {ipu.block = "B", ipu.ipu_id = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// A Block's ipu_id outside the ids the passes take (the schedule keeps state per IPU):
// 2^40 made ipu-schedule allocate per-IPU state until memory ran out; -1 read as stage -1.
func.func @ipu_id_too_large(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.relu"(%x) {ipu.block = "A", ipu.ipu_id = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  // expected-error @+1 {{block 'B' has ipu_id 1099511627776, but IPU ids go from 0 to 65535; give its poptorch.Block (or BeginBlock, BlockFunction) an ipu_id in that range}}
  %1 = "ipu.exp"(%0) {ipu.block = "B", ipu.ipu_id = 1099511627776 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

func.func @ipu_id_negative(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{block 'A' has ipu_id -1, but IPU ids go from 0 to 65535; give its poptorch.Block (or BeginBlock, BlockFunction) an ipu_id in that range}}
  %0 = "ipu.relu"(%x) {ipu.block = "A", ipu.ipu_id = -1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @ipu_id_string_too_large(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{block 'A' has ipu_id 70000, but IPU ids go from 0 to 65535; give its poptorch.Block (or BeginBlock, BlockFunction) an ipu_id in that range}}
  %0 = "ipu.relu"(%x) {ipu.block = "A", ipu.ipu_id = "70000"} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
