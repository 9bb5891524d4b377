// RUN: ipu-opt %s --ipu-insert-copies --split-input-file | FileCheck %s

// Stage 0 on IPU 0 feeds stage 1 on IPU 1: one copy, just before the consumer.
// CHECK-LABEL: func.func @two_ipus
// CHECK-NEXT:    %[[S0:.*]] = call @s0(%arg0) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    %[[C:.*]] = "ipu.copy"(%[[S0]]) {dst_ipu = 1 : i64, ipu.stage = #ipu.stage<1 : i64, 1 : i64>, src_ipu = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[S1:.*]] = call @s1(%[[C]]) {ipu.stage = #ipu.stage<1 : i64, 1 : i64>}
// CHECK-NEXT:    return %[[S1]]
func.func @two_ipus(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = call @s0(%x) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = call @s1(%0) {ipu.stage = #ipu.stage<1 : i64, 1 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
func.func private @s0(%a: tensor<4xf32>) -> tensor<4xf32> attributes {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} {
  %0 = "ipu.relu"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func private @s1(%a: tensor<4xf32>) -> tensor<4xf32> attributes {ipu.stage = #ipu.stage<1 : i64, 1 : i64>} {
  %0 = "ipu.exp"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Two stages on the same IPU (AutoStage.AutoIncrement on one IPU): no copy.
// CHECK-LABEL: func.func @same_ipu
// CHECK-NEXT:    %[[S0:.*]] = call @s0(%arg0) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    %[[S1:.*]] = call @s1(%[[S0]]) {ipu.stage = #ipu.stage<1 : i64, 0 : i64>}
// CHECK-NEXT:    return %[[S1]]
func.func @same_ipu(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = call @s0(%x) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = call @s1(%0) {ipu.stage = #ipu.stage<1 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
func.func private @s0(%a: tensor<4xf32>) -> tensor<4xf32> attributes {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} {
  %0 = "ipu.relu"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func private @s1(%a: tensor<4xf32>) -> tensor<4xf32> attributes {ipu.stage = #ipu.stage<1 : i64, 0 : i64>} {
  %0 = "ipu.exp"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// %0 (IPU 0) is used by stages 1 and 2, both on IPU 1, and by stage 3 on IPU 2: one
// copy to IPU 1 shared by both consumers there, one to IPU 2. Stage 2 also reads the
// function argument %x (from the host: no copy) and returns %0 (to the host: no copy).
// CHECK-LABEL: func.func @shared_copy
// CHECK-SAME:      (%[[X:.*]]: tensor<4xf32>)
// CHECK-NEXT:    %[[S0:.*]] = call @s0(%[[X]]) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
// CHECK-NEXT:    %[[C1:.*]] = "ipu.copy"(%[[S0]]) {dst_ipu = 1 : i64, ipu.stage = #ipu.stage<1 : i64, 1 : i64>, src_ipu = 0 : i64}
// CHECK-NEXT:    %[[S1:.*]] = call @s1(%[[C1]]) {ipu.stage = #ipu.stage<1 : i64, 1 : i64>}
// CHECK-NEXT:    %[[S2:.*]] = call @s2(%[[C1]], %[[X]]) {ipu.stage = #ipu.stage<2 : i64, 1 : i64>}
// CHECK-NEXT:    %[[C2:.*]] = "ipu.copy"(%[[S0]]) {dst_ipu = 2 : i64, ipu.stage = #ipu.stage<3 : i64, 2 : i64>, src_ipu = 0 : i64}
// CHECK-NEXT:    %[[S3:.*]] = call @s3(%[[C2]]) {ipu.stage = #ipu.stage<3 : i64, 2 : i64>}
// CHECK-NEXT:    return %[[S0]], %[[S1]], %[[S2]], %[[S3]]
func.func @shared_copy(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = call @s0(%x) {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = call @s1(%0) {ipu.stage = #ipu.stage<1 : i64, 1 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = call @s2(%0, %x) {ipu.stage = #ipu.stage<2 : i64, 1 : i64>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = call @s3(%0) {ipu.stage = #ipu.stage<3 : i64, 2 : i64>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0, %1, %2, %3 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
func.func private @s0(%a: tensor<4xf32>) -> tensor<4xf32> attributes {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} {
  %0 = "ipu.relu"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func private @s1(%a: tensor<4xf32>) -> tensor<4xf32> attributes {ipu.stage = #ipu.stage<1 : i64, 1 : i64>} {
  %0 = "ipu.exp"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func private @s3(%a: tensor<4xf32>) -> tensor<4xf32> attributes {ipu.stage = #ipu.stage<3 : i64, 2 : i64>} {
  %0 = "ipu.neg"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func private @s2(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> attributes {ipu.stage = #ipu.stage<2 : i64, 1 : i64>} {
  %0 = "ipu.add"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// A function without stage calls has nothing to copy.
// CHECK-LABEL: func.func @no_stages
// CHECK-NEXT:    %[[R:.*]] = "ipu.relu"(%arg0)
// CHECK-NEXT:    return %[[R]]
func.func @no_stages(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.relu"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
