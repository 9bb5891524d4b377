// RUN: ipu-opt %s --ipu-assign-stages --ipu-outline-stages --ipu-insert-copies \
// RUN:   --ipu-schedule=micro-batches=4 | FileCheck %s

// The spec's 4-stage pipeline (Listing 4.8): Block.useAutoId() names the blocks "0" to
// "3", on IPUs 0 to 3; layer1 and layer2 (Linear + ReLU) on IPUs 0 and 1, layer3 and
// layer4 both on IPU 2, the softmax (decomposed: max, sub, exp, sum, div) on IPU 3.
// Through the multi-IPU chain with deviceIterations(4): four stage calls taking the
// weights from the function's arguments, three IPU-Link copies between them, and the
// pipeline schedule (stage k on micro-batch mb in slot mb + k).
// CHECK-LABEL: func.func @network
// CHECK-SAME:      (%[[X:.*]]: tensor<4x5xf32>, %[[W1:.*]]: tensor<5x10xf32>, %[[B1:.*]]: tensor<10xf32>, %[[W2:.*]]: tensor<10x5xf32>, %[[B2:.*]]: tensor<5xf32>, %[[W3:.*]]: tensor<5x5xf32>, %[[B3:.*]]: tensor<5xf32>, %[[W4:.*]]: tensor<5x5xf32>, %[[B4:.*]]: tensor<5xf32>) -> tensor<4x5xf32>
// CHECK-SAME:    attributes {ipu.in_flight = array<i64: 1, 1, 1, 1>, ipu.micro_batches = 4 : i64, ipu.schedule = "gpipe",
// CHECK-SAME:    ipu.tasks = array<i64: 0, 0, 0, 1, 1, 0, 0, 2, 1, 1, 2, 0, 0, 3, 1, 2, 2, 1, 3, 0, 1, 3, 2, 2, 3, 1, 2, 3, 3, 2, 3, 3>}
// CHECK-NEXT:    %[[S0:.*]] = call @network_stage0(%[[X]], %[[W1]], %[[B1]]) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4x5xf32>, tensor<5x10xf32>, tensor<10xf32>) -> tensor<4x10xf32>
// CHECK-NEXT:    %[[C0:.*]] = "ipu.copy"(%[[S0]]) {dst_ipu = 1 : i64, ipu.stage = #ipu.stage<1 : i64, 1 : i64>, src_ipu = 0 : i64} : (tensor<4x10xf32>) -> tensor<4x10xf32>
// CHECK-NEXT:    %[[S1:.*]] = call @network_stage1(%[[C0]], %[[W2]], %[[B2]]) {ipu.stage = #ipu.stage<1 : i64, 1 : i64>}
// CHECK-NEXT:    %[[C1:.*]] = "ipu.copy"(%[[S1]]) {dst_ipu = 2 : i64, ipu.stage = #ipu.stage<2 : i64, 2 : i64>, src_ipu = 1 : i64}
// CHECK-NEXT:    %[[S2:.*]] = call @network_stage2(%[[C1]], %[[W3]], %[[B3]], %[[W4]], %[[B4]]) {ipu.stage = #ipu.stage<2 : i64, 2 : i64>}
// CHECK-NEXT:    %[[C2:.*]] = "ipu.copy"(%[[S2]]) {dst_ipu = 3 : i64, ipu.stage = #ipu.stage<3 : i64, 3 : i64>, src_ipu = 2 : i64}
// CHECK-NEXT:    %[[S3:.*]] = call @network_stage3(%[[C2]]) {ipu.stage = #ipu.stage<3 : i64, 3 : i64>}
// CHECK-NEXT:    return %[[S3]] : tensor<4x5xf32>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @network_stage0({{.*}}) -> tensor<4x10xf32> attributes {ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    "ipu.matmul"
// CHECK-NEXT:    "ipu.add"
// CHECK-NEXT:    "ipu.relu"
// CHECK-NEXT:    return
// CHECK:       func.func private @network_stage1({{.*}}) -> tensor<4x5xf32> attributes {ipu.stage = #ipu.stage<1 : i64, 1 : i64>}
// CHECK:       func.func private @network_stage2({{.*}}) -> tensor<4x5xf32> attributes {ipu.stage = #ipu.stage<2 : i64, 2 : i64>}
// CHECK-NEXT:    "ipu.matmul"
// CHECK-NEXT:    "ipu.add"
// CHECK-NEXT:    "ipu.relu"
// CHECK-NEXT:    "ipu.matmul"
// CHECK-NEXT:    "ipu.add"
// CHECK-NEXT:    "ipu.relu"
// CHECK-NEXT:    return
// CHECK:       func.func private @network_stage3(%{{.*}}: tensor<4x5xf32>) -> tensor<4x5xf32> attributes {ipu.stage = #ipu.stage<3 : i64, 3 : i64>}
// CHECK-NEXT:    "ipu.reduce"{{.*}}kind = "max"
// CHECK-NEXT:    "ipu.sub"
// CHECK-NEXT:    "ipu.exp"
// CHECK-NEXT:    "ipu.reduce"{{.*}}kind = "sum"
// CHECK-NEXT:    "ipu.div"
// CHECK-NEXT:    return
func.func @network(%x: tensor<4x5xf32>, %w1: tensor<5x10xf32>, %b1: tensor<10xf32>, %w2: tensor<10x5xf32>, %b2: tensor<5xf32>, %w3: tensor<5x5xf32>, %b3: tensor<5xf32>, %w4: tensor<5x5xf32>, %b4: tensor<5xf32>) -> tensor<4x5xf32> {
  %0 = "ipu.matmul"(%x, %w1) {ipu.block = "0", ipu.ipu_id = 0 : i64} : (tensor<4x5xf32>, tensor<5x10xf32>) -> tensor<4x10xf32>
  %1 = "ipu.add"(%0, %b1) {ipu.block = "0", ipu.ipu_id = 0 : i64} : (tensor<4x10xf32>, tensor<10xf32>) -> tensor<4x10xf32>
  %2 = "ipu.relu"(%1) {ipu.block = "0", ipu.ipu_id = 0 : i64} : (tensor<4x10xf32>) -> tensor<4x10xf32>
  %3 = "ipu.matmul"(%2, %w2) {ipu.block = "1", ipu.ipu_id = 1 : i64} : (tensor<4x10xf32>, tensor<10x5xf32>) -> tensor<4x5xf32>
  %4 = "ipu.add"(%3, %b2) {ipu.block = "1", ipu.ipu_id = 1 : i64} : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %5 = "ipu.relu"(%4) {ipu.block = "1", ipu.ipu_id = 1 : i64} : (tensor<4x5xf32>) -> tensor<4x5xf32>
  %6 = "ipu.matmul"(%5, %w3) {ipu.block = "2", ipu.ipu_id = 2 : i64} : (tensor<4x5xf32>, tensor<5x5xf32>) -> tensor<4x5xf32>
  %7 = "ipu.add"(%6, %b3) {ipu.block = "2", ipu.ipu_id = 2 : i64} : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %8 = "ipu.relu"(%7) {ipu.block = "2", ipu.ipu_id = 2 : i64} : (tensor<4x5xf32>) -> tensor<4x5xf32>
  %9 = "ipu.matmul"(%8, %w4) {ipu.block = "2", ipu.ipu_id = 2 : i64} : (tensor<4x5xf32>, tensor<5x5xf32>) -> tensor<4x5xf32>
  %10 = "ipu.add"(%9, %b4) {ipu.block = "2", ipu.ipu_id = 2 : i64} : (tensor<4x5xf32>, tensor<5xf32>) -> tensor<4x5xf32>
  %11 = "ipu.relu"(%10) {ipu.block = "2", ipu.ipu_id = 2 : i64} : (tensor<4x5xf32>) -> tensor<4x5xf32>
  %12 = "ipu.reduce"(%11) {ipu.block = "3", ipu.ipu_id = 3 : i64, kind = "max", dims = array<i64: 1>, keepdim = true} : (tensor<4x5xf32>) -> tensor<4x1xf32>
  %13 = "ipu.sub"(%11, %12) {ipu.block = "3", ipu.ipu_id = 3 : i64} : (tensor<4x5xf32>, tensor<4x1xf32>) -> tensor<4x5xf32>
  %14 = "ipu.exp"(%13) {ipu.block = "3", ipu.ipu_id = 3 : i64} : (tensor<4x5xf32>) -> tensor<4x5xf32>
  %15 = "ipu.reduce"(%14) {ipu.block = "3", ipu.ipu_id = 3 : i64, kind = "sum", dims = array<i64: 1>, keepdim = true} : (tensor<4x5xf32>) -> tensor<4x1xf32>
  %16 = "ipu.div"(%14, %15) {ipu.block = "3", ipu.ipu_id = 3 : i64} : (tensor<4x5xf32>, tensor<4x1xf32>) -> tensor<4x5xf32>
  return %16 : tensor<4x5xf32>
}
