// RUN: ipu-opt %s --ipu-assign-stages=auto-stage=auto-increment --split-input-file | FileCheck %s
// RUN: ipu-opt %s --ipu-assign-stages="stages=E=0:0,L0=1:0,L1=2:1,L2=3:1,H=4:0" --split-input-file \
// RUN:   | FileCheck %s --check-prefix=EXPLICIT

// Graphcore's BERT: one block per layer with AutoIncrement, embeddings and a layer on
// IPU 0, two layers on IPU 1, the heads back on IPU 0. PopTorch merges consecutive
// blocks on one IPU into one pipeline stage (spec 4.4.2; a new stage at each change of
// IPU): stages 0, 0, 1, 1, 2, not 0 to 4. The backward op takes its block's stage.
// CHECK-LABEL: func.func @bert_blocks
// CHECK-NEXT:    "ipu.relu"(%{{.*}}) {ipu.block = "E", ipu.ipu_id = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    "ipu.exp"(%{{.*}}) {ipu.block = "L0", ipu.ipu_id = 0 : i64, ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    "ipu.neg"(%{{.*}}) {ipu.block = "L1", ipu.ipu_id = 1 : i64, ipu.stage = #ipu.stage<1 : i64, 1 : i64>}
// CHECK-NEXT:    "ipu.abs"(%{{.*}}) {ipu.block = "L2", ipu.ipu_id = 1 : i64, ipu.stage = #ipu.stage<1 : i64, 1 : i64>}
// CHECK-NEXT:    "ipu.tanh"(%{{.*}}) {ipu.block = "H", ipu.ipu_id = 0 : i64, ipu.stage = #ipu.stage<2 : i64, 0 : i64>}
// CHECK-NEXT:    "ipu.sigmoid"(%{{.*}}) {ipu.backward, ipu.block = "L1", ipu.ipu_id = 1 : i64, ipu.stage = #ipu.stage<1 : i64, 1 : i64>}
// The same blocks in explicit stages 0 to 4: consecutive stages on one IPU merge too.
// EXPLICIT-LABEL: func.func @bert_blocks
// EXPLICIT-NEXT:    ipu.stage = #ipu.stage<0 : i64, 0 : i64>
// EXPLICIT-NEXT:    ipu.stage = #ipu.stage<0 : i64, 0 : i64>
// EXPLICIT-NEXT:    ipu.stage = #ipu.stage<1 : i64, 1 : i64>
// EXPLICIT-NEXT:    ipu.stage = #ipu.stage<1 : i64, 1 : i64>
// EXPLICIT-NEXT:    ipu.stage = #ipu.stage<2 : i64, 0 : i64>
// EXPLICIT-NEXT:    ipu.stage = #ipu.stage<1 : i64, 1 : i64>
func.func @bert_blocks(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "ipu.relu"(%x) {ipu.block = "E", ipu.ipu_id = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "ipu.exp"(%0) {ipu.block = "L0", ipu.ipu_id = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "ipu.neg"(%1) {ipu.block = "L1", ipu.ipu_id = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %3 = "ipu.abs"(%2) {ipu.block = "L2", ipu.ipu_id = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %4 = "ipu.tanh"(%3) {ipu.block = "H", ipu.ipu_id = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  %5 = "ipu.sigmoid"(%4) {ipu.backward, ipu.block = "L1", ipu.ipu_id = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %4, %5 : tensor<4xf32>, tensor<4xf32>
}
