// RUN: ipu-opt %s | ipu-opt | FileCheck %s

// The ops of dialects/slicing.py parse, verify and print back.

// CHECK-LABEL: func.func @dynamic_slice_and_update
// CHECK:         %[[S:.*]] = "ipu.dynamic_slice"(%arg0, %arg2) {dim = 0 : i64, size = 2 : i64} : (tensor<8x3xf32>, tensor<1xi32>) -> tensor<2x3xf32>
// CHECK-NEXT:    "ipu.dynamic_update"(%arg0, %[[S]], %arg1) {dim = 0 : i64} : (tensor<8x3xf32>, tensor<2x3xf32>, tensor<i64>) -> tensor<8x3xf32>
func.func @dynamic_slice_and_update(%x: tensor<8x3xf32>, %j: tensor<i64>, %i: tensor<1xi32>) -> tensor<8x3xf32> {
  %0 = "ipu.dynamic_slice"(%x, %i) {dim = 0 : i64, size = 2 : i64} : (tensor<8x3xf32>, tensor<1xi32>) -> tensor<2x3xf32>
  %1 = "ipu.dynamic_update"(%x, %0, %j) {dim = 0 : i64} : (tensor<8x3xf32>, tensor<2x3xf32>, tensor<i64>) -> tensor<8x3xf32>
  return %1 : tensor<8x3xf32>
}
