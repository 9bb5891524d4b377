// RUN: ipu-opt %s --ipu-narrow-f64 --split-input-file | FileCheck %s

// LayerNorm's variance as torch decomposes it: the squares summed in f64.
// CHECK-LABEL: func.func @variance
// CHECK-SAME:    (%[[X:.*]]: tensor<2x4xf32>) -> tensor<2x1xf32>
// CHECK-NEXT:    %[[S:.*]] = "ipu.reduce"(%[[X]]) {dims = array<i64: 1>, keepdim = true, kind = "sum"} : (tensor<2x4xf32>) -> tensor<2x1xf32>
// CHECK-NEXT:    %[[N:.*]] = "ipu.constant"() {value = dense<4.000000e+00> : tensor<f32>} : () -> tensor<f32>
// CHECK-NEXT:    %[[M:.*]] = "ipu.div"(%[[S]], %[[N]]) : (tensor<2x1xf32>, tensor<f32>) -> tensor<2x1xf32>
// CHECK-NEXT:    %[[D:.*]] = "ipu.sub"(%[[X]], %[[M]]) : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    %[[Q:.*]] = "ipu.mul"(%[[D]], %[[D]]) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    %[[V:.*]] = "ipu.reduce"(%[[Q]]) {dims = array<i64: 1>, keepdim = true, kind = "sum"} : (tensor<2x4xf32>) -> tensor<2x1xf32>
// CHECK-NEXT:    return %[[V]] : tensor<2x1xf32>
func.func @variance(%x: tensor<2x4xf32>) -> tensor<2x1xf32> {
  %0 = "ipu.cast"(%x) : (tensor<2x4xf32>) -> tensor<2x4xf64>
  %1 = "ipu.reduce"(%0) {dims = array<i64: 1>, keepdim = true, kind = "sum"} : (tensor<2x4xf64>) -> tensor<2x1xf64>
  %n = "ipu.constant"() {value = dense<4.0> : tensor<f64>} : () -> tensor<f64>
  %2 = "ipu.div"(%1, %n) : (tensor<2x1xf64>, tensor<f64>) -> tensor<2x1xf64>
  %3 = "ipu.sub"(%0, %2) : (tensor<2x4xf64>, tensor<2x1xf64>) -> tensor<2x4xf64>
  %4 = "ipu.mul"(%3, %3) : (tensor<2x4xf64>, tensor<2x4xf64>) -> tensor<2x4xf64>
  %5 = "ipu.reduce"(%4) {dims = array<i64: 1>, keepdim = true, kind = "sum"} : (tensor<2x4xf64>) -> tensor<2x1xf64>
  %6 = "ipu.cast"(%5) : (tensor<2x1xf64>) -> tensor<2x1xf32>
  return %6 : tensor<2x1xf32>
}

// -----

// f64 arguments, results and dense constants narrow too; other types and casts stay.
// CHECK-LABEL: func.func @signature
// CHECK-SAME:    (%[[A:.*]]: tensor<3xf32>, %[[I:.*]]: tensor<3xi32>) -> (tensor<3xf32>, tensor<3xf16>)
// CHECK-NEXT:    %[[C:.*]] = "ipu.constant"() {value = dense<[1.000000e+00, 2.500000e+00, -3.000000e+00]> : tensor<3xf32>}
// CHECK-NEXT:    %[[F:.*]] = "ipu.cast"(%[[I]]) : (tensor<3xi32>) -> tensor<3xf32>
// CHECK-NEXT:    %[[S:.*]] = "ipu.add"(%[[A]], %[[C]]) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
// CHECK-NEXT:    %[[T:.*]] = "ipu.add"(%[[S]], %[[F]]) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
// CHECK-NEXT:    %[[H:.*]] = "ipu.cast"(%[[T]]) : (tensor<3xf32>) -> tensor<3xf16>
// CHECK-NEXT:    return %[[T]], %[[H]] : tensor<3xf32>, tensor<3xf16>
func.func @signature(%a: tensor<3xf64>, %i: tensor<3xi32>) -> (tensor<3xf64>, tensor<3xf16>) {
  %c = "ipu.constant"() {value = dense<[1.0, 2.5, -3.0]> : tensor<3xf64>} : () -> tensor<3xf64>
  %f = "ipu.cast"(%i) : (tensor<3xi32>) -> tensor<3xf64>
  %s = "ipu.add"(%a, %c) : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
  %t = "ipu.add"(%s, %f) : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
  %h = "ipu.cast"(%t) : (tensor<3xf64>) -> tensor<3xf16>
  return %t, %h : tensor<3xf64>, tensor<3xf16>
}
