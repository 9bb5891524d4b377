// RUN: ipu-opt %s --ipu-assign-stages --split-input-file | FileCheck %s
// RUN: ipu-opt %s --ipu-assign-stages=auto-stage=auto-increment --split-input-file \
// RUN:   | FileCheck %s --check-prefix=INC
// RUN: ipu-opt %s --pass-pipeline='builtin.module(ipu-assign-stages{stages=A=0:2,B=1:3})' \
// RUN:   --split-input-file | FileCheck %s --check-prefix=MAP
// RUN: ipu-opt %s --pass-pipeline='builtin.module(ipu-assign-stages{stages=A=0:0:0,B=1:0:1})' \
// RUN:   --split-input-file | FileCheck %s --check-prefix=PHASE

// Two blocks on IPUs 0 and 1: AutoStage.SameAsIpu makes stage = IPU.
// CHECK-LABEL: func.func @two_blocks
// CHECK:         "ipu.relu"(%arg0) {ipu.block = "A", ipu.ipu_id = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK:         "ipu.exp"(%{{.*}}) {ipu.block = "B", ipu.ipu_id = 1 : i64, ipu.stage = #ipu.stage<1 : i64, 1 : i64>}
// INC-LABEL: func.func @two_blocks
// INC:         ipu.stage = #ipu.stage<0 : i64, 0 : i64>
// INC:         ipu.stage = #ipu.stage<1 : i64, 1 : i64>
// MAP-LABEL: func.func @two_blocks
// MAP:         "ipu.relu"{{.*}}ipu.stage = #ipu.stage<0 : i64, 2 : i64>
// MAP:         "ipu.exp"{{.*}}ipu.stage = #ipu.stage<1 : i64, 3 : i64>
// A Stage's third field is its Phase (block=stage:ipu:phase): both blocks on IPU 0, one
// phase each.
// PHASE-LABEL: func.func @two_blocks
// PHASE:         "ipu.relu"{{.*}}ipu.phase = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>
// PHASE:         "ipu.exp"{{.*}}ipu.phase = 1 : i64, ipu.stage = #ipu.stage<1 : i64, 0 : i64>
func.func @two_blocks(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.relu"(%x) {ipu.block = "A", ipu.ipu_id = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "ipu.exp"(%0) {ipu.block = "B", ipu.ipu_id = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}

// -----

// Without blocks the pass changes nothing.
// CHECK-LABEL: func.func @no_blocks
// CHECK-NEXT:    "ipu.relu"(%arg0) : (tensor<4xf32>) -> tensor<4xf32>
func.func @no_blocks(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.relu"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
