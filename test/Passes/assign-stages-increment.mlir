// RUN: ipu-opt %s --ipu-assign-stages=auto-stage=auto-increment | FileCheck %s

// The spec's example of blocks "0", "1", "2" on IPUs 0, 1, 0: AutoIncrement keeps the
// stages ascending (0, 1, 2) where SameAsIpu fails (see assign-stages-invalid.mlir).
// CHECK-LABEL: func.func @revisit_ipu
// CHECK:         ipu.stage = #ipu.stage<0 : i64, 0 : i64>
// CHECK:         ipu.stage = #ipu.stage<1 : i64, 1 : i64>
// CHECK:         ipu.stage = #ipu.stage<2 : i64, 0 : i64>
func.func @revisit_ipu(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.relu"(%x) {ipu.block = "0", ipu.ipu_id = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "ipu.exp"(%0) {ipu.block = "1", ipu.ipu_id = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "ipu.neg"(%1) {ipu.block = "2", ipu.ipu_id = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %2 : tensor<4xf32>
}
