// RUN: ipu-opt %s --ipu-simplify --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @neutral_elements
// CHECK-NEXT:    %[[M:.*]] = "ipu.matmul"(%arg0, %arg1)
// CHECK-NEXT:    return %[[M]]
func.func @neutral_elements(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  %one = "ipu.constant"() {value = dense<1.0> : tensor<f32>} : () -> tensor<f32>
  %zero = "ipu.constant"() {value = dense<0.0> : tensor<4xf32>} : () -> tensor<4xf32>
  %0 = "ipu.matmul"(%a, %b) : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  %1 = "ipu.mul"(%0, %one) : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %2 = "ipu.add"(%zero, %1) : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %3 = "ipu.div"(%2, %one) : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %4 = "ipu.sub"(%3, %zero) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %4 : tensor<2x4xf32>
}

// -----

// Broadcasting by the neutral element changes the type: it stays.
// CHECK-LABEL: func.func @broadcasting_kept
// CHECK:         "ipu.mul"(%arg0, %{{.*}}) : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK:         "ipu.sub"(%{{.*}}, %arg0) : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
func.func @broadcasting_kept(%x: tensor<4xf32>) -> (tensor<2x4xf32>, tensor<4xf32>) {
  %one = "ipu.constant"() {value = dense<1.0> : tensor<2x4xf32>} : () -> tensor<2x4xf32>
  %zero = "ipu.constant"() {value = dense<0.0> : tensor<f32>} : () -> tensor<f32>
  %0 = "ipu.mul"(%x, %one) : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %1 = "ipu.sub"(%zero, %x) : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<2x4xf32>, tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @layout_no_ops
// CHECK-NEXT:    %[[P:.*]] = "ipu.permute"(%arg0) {dims = array<i64: 1, 0>}
// CHECK-NEXT:    return %arg0, %[[P]]
func.func @layout_no_ops(%x: tensor<3x3xf32>) -> (tensor<3x3xf32>, tensor<3x3xf32>) {
  %0 = "ipu.reshape"(%x) : (tensor<3x3xf32>) -> tensor<3x3xf32>
  %1 = "ipu.permute"(%0) {dims = array<i64: 0, 1>} : (tensor<3x3xf32>) -> tensor<3x3xf32>
  %2 = "ipu.broadcast"(%1) : (tensor<3x3xf32>) -> tensor<3x3xf32>
  %3 = "ipu.permute"(%x) {dims = array<i64: 1, 0>} : (tensor<3x3xf32>) -> tensor<3x3xf32>
  return %2, %3 : tensor<3x3xf32>, tensor<3x3xf32>
}

// -----

// CHECK-LABEL: func.func @reshape_chains
// CHECK-NEXT:    %[[R:.*]] = "ipu.reshape"(%arg0) : (tensor<16xf32>) -> tensor<16x1x1xf32>
// CHECK-NEXT:    return %[[R]], %arg0
func.func @reshape_chains(%x: tensor<16xf32>) -> (tensor<16x1x1xf32>, tensor<16xf32>) {
  %0 = "ipu.reshape"(%x) : (tensor<16xf32>) -> tensor<16x1xf32>
  %1 = "ipu.reshape"(%0) : (tensor<16x1xf32>) -> tensor<16x1x1xf32>
  %2 = "ipu.reshape"(%1) : (tensor<16x1x1xf32>) -> tensor<16xf32>
  return %1, %2 : tensor<16x1x1xf32>, tensor<16xf32>
}

// -----

// CHECK-LABEL: func.func @permute_chains
// CHECK-NEXT:    %[[P:.*]] = "ipu.permute"(%arg0) {dims = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
// CHECK-NEXT:    %[[Q:.*]] = "ipu.permute"(%arg0) {dims = array<i64: 1, 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
// CHECK-NEXT:    return %arg0, %[[P]], %[[Q]], %[[Q]]
func.func @permute_chains(%x: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<4x2x3xf32>,
                                                    tensor<3x2x4xf32>, tensor<3x2x4xf32>) {
  // a transpose transposed back is the operand
  %0 = "ipu.permute"(%x) {dims = array<i64: 1, 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  %1 = "ipu.permute"(%0) {dims = array<i64: 1, 0, 2>} : (tensor<3x2x4xf32>) -> tensor<2x3x4xf32>
  // two rotations are one: result dim i is %x's dim first[second[i]]
  %2 = "ipu.permute"(%x) {dims = array<i64: 1, 2, 0>} : (tensor<2x3x4xf32>) -> tensor<3x4x2xf32>
  %3 = "ipu.permute"(%2) {dims = array<i64: 1, 2, 0>} : (tensor<3x4x2xf32>) -> tensor<4x2x3xf32>
  // a permute read twice stays, and a chain over it becomes one permute of %x
  %4 = "ipu.permute"(%x) {dims = array<i64: 1, 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
  %5 = "ipu.permute"(%4) {dims = array<i64: 0, 1, 2>} : (tensor<3x2x4xf32>) -> tensor<3x2x4xf32>
  return %1, %3, %4, %5 : tensor<2x3x4xf32>, tensor<4x2x3xf32>, tensor<3x2x4xf32>, tensor<3x2x4xf32>
}

// -----

// A reshape moves below the unary ops that read it, which keep their attributes (the
// reshape gets them too); the relu's reshape back to the add's shape folds away, and
// the relu follows the add.
// CHECK-LABEL: func.func @unary_of_reshape
// CHECK-NEXT:    %[[A:.*]] = "ipu.add"(%arg0, %arg1) {ipu.name_scope = "fc"}
// CHECK-NEXT:    %[[R:.*]] = "ipu.relu"(%[[A]]) {ipu.name_scope = "act"} : (tensor<64x512xf32>) -> tensor<64x512xf32>
// CHECK-NEXT:    %[[T:.*]] = "ipu.tanh"(%[[A]]) {ipu.name_scope = "act"} : (tensor<64x512xf32>) -> tensor<64x512xf32>
// CHECK-NEXT:    %[[E:.*]] = "ipu.exp"(%[[T]]) : (tensor<64x512xf32>) -> tensor<64x512xf32>
// CHECK-NEXT:    %[[S:.*]] = "ipu.reshape"(%[[E]]) : (tensor<64x512xf32>) -> tensor<8x8x512xf32>
// CHECK-NEXT:    return %[[R]], %[[S]]
func.func @unary_of_reshape(%x: tensor<64x512xf32>, %b: tensor<512xf32>)
    -> (tensor<64x512xf32>, tensor<8x8x512xf32>) {
  %0 = "ipu.add"(%x, %b) {ipu.name_scope = "fc"} : (tensor<64x512xf32>, tensor<512xf32>) -> tensor<64x512xf32>
  %1 = "ipu.reshape"(%0) {ipu.name_scope = "fc"} : (tensor<64x512xf32>) -> tensor<8x8x512xf32>
  %2 = "ipu.relu"(%1) {ipu.name_scope = "act"} : (tensor<8x8x512xf32>) -> tensor<8x8x512xf32>
  %3 = "ipu.reshape"(%2) : (tensor<8x8x512xf32>) -> tensor<64x512xf32>
  %4 = "ipu.tanh"(%1) {ipu.name_scope = "act"} : (tensor<8x8x512xf32>) -> tensor<8x8x512xf32>
  %5 = "ipu.exp"(%4) : (tensor<8x8x512xf32>) -> tensor<8x8x512xf32>
  return %3, %5 : tensor<64x512xf32>, tensor<8x8x512xf32>
}
