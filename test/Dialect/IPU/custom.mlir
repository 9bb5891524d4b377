// RUN: ipu-opt %s | FileCheck %s
// RUN: ipu-opt %s | ipu-opt | FileCheck %s
// RUN: ipu-opt %s -o %t.1 && ipu-opt %t.1 -o %t.2 && diff %t.1 %t.2

// The ops of dialects/custom.py parse, verify and print back in generic form: operands
// and results of different types, in the first of their optional slots.

// CHECK-LABEL: func.func @custom
// CHECK-NEXT:    %[[C:.*]]:2 = "ipu.custom"(%arg0, %arg1) {attrs = {alpha = 2.000000e-02 : f32, names = ["a", "b"]}, domain = "com.acme", domain_version = 1 : i64, gradient = false, op_name = "Cube", operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x8xf32>, tensor<8xi32>) -> (tensor<2x8xf32>, tensor<f16>)
// CHECK-NEXT:    %[[H:.*]] = "ipu.host_call"(%[[C]]#0) {callback = "MyCPUOp", operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:    return %[[H]], %[[C]]#1
func.func @custom(%x: tensor<2x8xf32>, %b: tensor<8xi32>) -> (tensor<2x8xf32>, tensor<f16>) {
  %0:2 = "ipu.custom"(%x, %b) {op_name = "Cube", domain = "com.acme", domain_version = 1 : i64, attrs = {alpha = 0.02 : f32, names = ["a", "b"]}, gradient = false, operandSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x8xf32>, tensor<8xi32>) -> (tensor<2x8xf32>, tensor<f16>)
  %1 = "ipu.host_call"(%0#0) {callback = "MyCPUOp", operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return %1, %0#1 : tensor<2x8xf32>, tensor<f16>
}
