// RUN: ipu-opt %s | ipu-opt | FileCheck %s
// RUN: ipu-opt %s -o %t.1 && ipu-opt %t.1 -o %t.2 && diff %t.1 %t.2

// Every op of dialects/indexing.py parses, verifies and prints back in generic form.

// CHECK-LABEL: func.func @gathers
// CHECK-NEXT:    "ipu.gather"(%arg0, %arg1) {dim = 1 : i64} : (tensor<4x5xf32>, tensor<3x2xi32>) -> tensor<3x2xf32>
// CHECK-NEXT:    "ipu.index_select"(%arg0, %arg1) {dim = 1 : i64} : (tensor<4x5xf32>, tensor<3x2xi32>) -> tensor<4x3x2xf32>
// CHECK-NEXT:    "ipu.index"(%arg0, %arg2) : (tensor<4x5xf32>, tensor<3x2xi64>) -> tensor<3xf32>
// CHECK-NEXT:    "ipu.diagonal"(%arg0) {dim1 = 0 : i64, dim2 = 1 : i64, offset = -2 : i64} : (tensor<4x5xf32>) -> tensor<2xf32>
func.func @gathers(%x: tensor<4x5xf32>, %i: tensor<3x2xi32>, %ij: tensor<3x2xi64>) -> (tensor<3x2xf32>, tensor<4x3x2xf32>, tensor<3xf32>, tensor<2xf32>) {
  %0 = "ipu.gather"(%x, %i) {dim = 1 : i64} : (tensor<4x5xf32>, tensor<3x2xi32>) -> tensor<3x2xf32>
  %1 = "ipu.index_select"(%x, %i) {dim = 1 : i64} : (tensor<4x5xf32>, tensor<3x2xi32>) -> tensor<4x3x2xf32>
  %2 = "ipu.index"(%x, %ij) : (tensor<4x5xf32>, tensor<3x2xi64>) -> tensor<3xf32>
  %3 = "ipu.diagonal"(%x) {offset = -2 : i64, dim1 = 0 : i64, dim2 = 1 : i64} : (tensor<4x5xf32>) -> tensor<2xf32>
  return %0, %1, %2, %3 : tensor<3x2xf32>, tensor<4x3x2xf32>, tensor<3xf32>, tensor<2xf32>
}

// CHECK-LABEL: func.func @updates
// CHECK-NEXT:    "ipu.index_put"(%arg0, %arg1, %arg2) {accumulate = true} : (tensor<4x5xf32>, tensor<3x1xi32>, tensor<5xf32>) -> tensor<4x5xf32>
// CHECK-NEXT:    "ipu.scatter"(%arg0, %arg3, %arg4) {dim = 0 : i64, include_self = false, reduction = "mean"} : (tensor<4x5xf32>, tensor<2x5xi32>, tensor<2x5xf32>) -> tensor<4x5xf32>
// CHECK-NEXT:    "ipu.slice_update"(%arg0, %arg4) {ends = array<i64: 4, 5>, starts = array<i64: 1, 0>, steps = array<i64: 2, 1>} : (tensor<4x5xf32>, tensor<2x5xf32>) -> tensor<4x5xf32>
func.func @updates(%x: tensor<4x5xf32>, %i: tensor<3x1xi32>, %v: tensor<5xf32>, %j: tensor<2x5xi32>, %s: tensor<2x5xf32>) -> (tensor<4x5xf32>, tensor<4x5xf32>, tensor<4x5xf32>) {
  %0 = "ipu.index_put"(%x, %i, %v) {accumulate = true} : (tensor<4x5xf32>, tensor<3x1xi32>, tensor<5xf32>) -> tensor<4x5xf32>
  %1 = "ipu.scatter"(%x, %j, %s) {dim = 0 : i64, reduction = "mean", include_self = false} : (tensor<4x5xf32>, tensor<2x5xi32>, tensor<2x5xf32>) -> tensor<4x5xf32>
  %2 = "ipu.slice_update"(%x, %s) {starts = array<i64: 1, 0>, ends = array<i64: 4, 5>, steps = array<i64: 2, 1>} : (tensor<4x5xf32>, tensor<2x5xf32>) -> tensor<4x5xf32>
  return %0, %1, %2 : tensor<4x5xf32>, tensor<4x5xf32>, tensor<4x5xf32>
}

// CHECK-LABEL: func.func @reorders
// CHECK-NEXT:    %[[S:.*]]:2 = "ipu.sort"(%arg0) {descending = true, dim = 0 : i64} : (tensor<4x5xf32>) -> (tensor<4x5xf32>, tensor<4x5xi64>)
// CHECK-NEXT:    "ipu.flip"(%[[S]]#0) {dims = array<i64: 1>} : (tensor<4x5xf32>) -> tensor<4x5xf32>
func.func @reorders(%x: tensor<4x5xf32>) -> (tensor<4x5xf32>, tensor<4x5xi64>) {
  %v, %i = "ipu.sort"(%x) {dim = 0 : i64, descending = true} : (tensor<4x5xf32>) -> (tensor<4x5xf32>, tensor<4x5xi64>)
  %f = "ipu.flip"(%v) {dims = array<i64: 1>} : (tensor<4x5xf32>) -> tensor<4x5xf32>
  return %f, %i : tensor<4x5xf32>, tensor<4x5xi64>
}

// CHECK-LABEL: func.func @bags
// CHECK-NEXT:    "ipu.embedding_bag"(%arg0, %arg1, %arg2) {include_last_offset = true, mode = "max", padding_idx = 0 : i64} : (tensor<10x3xf16>, tensor<6xi64>, tensor<4xi64>) -> tensor<3x3xf16>
func.func @bags(%w: tensor<10x3xf16>, %i: tensor<6xi64>, %o: tensor<4xi64>) -> tensor<3x3xf16> {
  %0 = "ipu.embedding_bag"(%w, %i, %o) {mode = "max", include_last_offset = true, padding_idx = 0 : i64} : (tensor<10x3xf16>, tensor<6xi64>, tensor<4xi64>) -> tensor<3x3xf16>
  return %0 : tensor<3x3xf16>
}
