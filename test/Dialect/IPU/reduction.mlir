// RUN: ipu-opt %s | FileCheck %s
// RUN: ipu-opt %s | ipu-opt | FileCheck %s

// Every op of dialects/reduction.py parses, verifies and prints back in generic form
// (attributes sorted by name); the second RUN line parses the printed form again.

// CHECK-LABEL: func.func @reduce(
// CHECK-SAME:      %[[X:.*]]: tensor<3x4x5xf32>, %[[B:.*]]: tensor<3x4xi1>, %[[H:.*]]: tensor<2xf16>)
// CHECK-NEXT:    "ipu.reduce"(%[[X]]) {dims = array<i64: 1>, keepdim = false, kind = "sum"} : (tensor<3x4x5xf32>) -> tensor<3x5xf32>
// CHECK-NEXT:    "ipu.reduce"(%[[X]]) {dims = array<i64: 0, 2>, keepdim = true, kind = "mean"} : (tensor<3x4x5xf32>) -> tensor<1x4x1xf32>
// CHECK-NEXT:    "ipu.reduce"(%[[X]]) {dims = array<i64: 0, 1, 2>, keepdim = false, kind = "square_sum"} : (tensor<3x4x5xf32>) -> tensor<f32>
// CHECK-NEXT:    "ipu.reduce"(%[[X]]) {dims = array<i64>, keepdim = false, kind = "max"} : (tensor<3x4x5xf32>) -> tensor<3x4x5xf32>
// CHECK-NEXT:    "ipu.reduce"(%[[B]]) {dims = array<i64: 0>, keepdim = false, kind = "all"} : (tensor<3x4xi1>) -> tensor<4xi1>
// CHECK-NEXT:    "ipu.reduce"(%[[H]]) {dims = array<i64: 0>, keepdim = true, kind = "prod"} : (tensor<2xf16>) -> tensor<1xf16>
// A sum or sum of squares of halves into float32 (popops::reduce's output type):
// CHECK-NEXT:    "ipu.reduce"(%[[H]]) {dims = array<i64: 0>, keepdim = true, kind = "sum"} : (tensor<2xf16>) -> tensor<1xf32>
// CHECK-NEXT:    "ipu.reduce"(%[[H]]) {dims = array<i64: 0>, keepdim = false, kind = "square_sum"} : (tensor<2xf16>) -> tensor<f32>
func.func @reduce(%x: tensor<3x4x5xf32>, %b: tensor<3x4xi1>, %h: tensor<2xf16>) {
  %0 = "ipu.reduce"(%x) {kind = "sum", dims = array<i64: 1>, keepdim = false} : (tensor<3x4x5xf32>) -> tensor<3x5xf32>
  %1 = "ipu.reduce"(%x) {kind = "mean", dims = array<i64: 0, 2>, keepdim = true} : (tensor<3x4x5xf32>) -> tensor<1x4x1xf32>
  %2 = "ipu.reduce"(%x) {kind = "square_sum", dims = array<i64: 0, 1, 2>, keepdim = false} : (tensor<3x4x5xf32>) -> tensor<f32>
  %3 = "ipu.reduce"(%x) {kind = "max", dims = array<i64>, keepdim = false} : (tensor<3x4x5xf32>) -> tensor<3x4x5xf32>
  %4 = "ipu.reduce"(%b) {kind = "all", dims = array<i64: 0>, keepdim = false} : (tensor<3x4xi1>) -> tensor<4xi1>
  %5 = "ipu.reduce"(%h) {kind = "prod", dims = array<i64: 0>, keepdim = true} : (tensor<2xf16>) -> tensor<1xf16>
  %6 = "ipu.reduce"(%h) {kind = "sum", dims = array<i64: 0>, keepdim = true} : (tensor<2xf16>) -> tensor<1xf32>
  %7 = "ipu.reduce"(%h) {kind = "square_sum", dims = array<i64: 0>, keepdim = false} : (tensor<2xf16>) -> tensor<f32>
  return
}

// CHECK-LABEL: func.func @arg(
// CHECK-SAME:      %[[X:.*]]: tensor<3x4xf32>)
// CHECK-NEXT:    "ipu.arg_max"(%[[X]]) {dim = 1 : i64, keepdim = false} : (tensor<3x4xf32>) -> tensor<3xi64>
// CHECK-NEXT:    "ipu.arg_min"(%[[X]]) {dim = 0 : i64, keepdim = true} : (tensor<3x4xf32>) -> tensor<1x4xi32>
func.func @arg(%x: tensor<3x4xf32>) {
  %0 = "ipu.arg_max"(%x) {dim = 1 : i64, keepdim = false} : (tensor<3x4xf32>) -> tensor<3xi64>
  %1 = "ipu.arg_min"(%x) {dim = 0 : i64, keepdim = true} : (tensor<3x4xf32>) -> tensor<1x4xi32>
  return
}

// CHECK-LABEL: func.func @scans(
// CHECK-SAME:      %[[X:.*]]: tensor<3x4xf32>, %[[I:.*]]: tensor<3x4xi32>)
// CHECK-NEXT:    "ipu.cumsum"(%[[X]]) {dim = 1 : i64} : (tensor<3x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT:    "ipu.cumprod"(%[[I]]) {dim = 0 : i64} : (tensor<3x4xi32>) -> tensor<3x4xi32>
func.func @scans(%x: tensor<3x4xf32>, %i: tensor<3x4xi32>) {
  %0 = "ipu.cumsum"(%x) {dim = 1 : i64} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  %1 = "ipu.cumprod"(%i) {dim = 0 : i64} : (tensor<3x4xi32>) -> tensor<3x4xi32>
  return
}
