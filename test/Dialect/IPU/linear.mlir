// RUN: ipu-opt %s | FileCheck %s
// RUN: ipu-opt %s | ipu-opt | FileCheck %s
// RUN: ipu-opt %s -o %t.1 && ipu-opt %t.1 -o %t.2 && diff %t.1 %t.2

// The op of dialects/linear.py, ipu.matmul, parses, verifies and prints back in generic
// form; the second RUN line checks that the printed form parses to the same IR, the
// third that it prints the same again.

// CHECK-LABEL: func.func @matmul(
// CHECK-SAME:      %[[A:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<3x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    %[[C:.*]] = "ipu.matmul"(%[[A]], %[[B]]) : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    return %[[C]] : tensor<2x4xf32>
func.func @matmul(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  %0 = "ipu.matmul"(%a, %b) : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// CHECK-LABEL: func.func @matmul$batched(
// CHECK-SAME:      %[[A:.*]]: tensor<5x2x3xf16>, %[[B:.*]]: tensor<5x3x4xf16>) -> tensor<5x2x4xf16>
// CHECK-NEXT:    %[[C:.*]] = "ipu.matmul"(%[[A]], %[[B]]) : (tensor<5x2x3xf16>, tensor<5x3x4xf16>) -> tensor<5x2x4xf16>
// CHECK-NEXT:    return %[[C]] : tensor<5x2x4xf16>
func.func @matmul$batched(%a: tensor<5x2x3xf16>, %b: tensor<5x3x4xf16>) -> tensor<5x2x4xf16> {
  %0 = "ipu.matmul"(%a, %b) : (tensor<5x2x3xf16>, tensor<5x3x4xf16>) -> tensor<5x2x4xf16>
  return %0 : tensor<5x2x4xf16>
}

// Batch dimensions broadcast as in torch.matmul: 7x1 against 5 gives 7x5, a 2-D
// operand is shared by every batch.
// CHECK-LABEL: func.func @matmul$broadcast_batch(
// CHECK-SAME:      %[[A:.*]]: tensor<7x1x2x3xf32>, %[[B:.*]]: tensor<5x3x4xf32>, %[[W:.*]]: tensor<4x6xf32>) -> tensor<7x5x2x6xf32>
// CHECK-NEXT:    %[[C:.*]] = "ipu.matmul"(%[[A]], %[[B]]) : (tensor<7x1x2x3xf32>, tensor<5x3x4xf32>) -> tensor<7x5x2x4xf32>
// CHECK-NEXT:    %[[D:.*]] = "ipu.matmul"(%[[C]], %[[W]]) : (tensor<7x5x2x4xf32>, tensor<4x6xf32>) -> tensor<7x5x2x6xf32>
// CHECK-NEXT:    return %[[D]] : tensor<7x5x2x6xf32>
func.func @matmul$broadcast_batch(%a: tensor<7x1x2x3xf32>, %b: tensor<5x3x4xf32>, %w: tensor<4x6xf32>) -> tensor<7x5x2x6xf32> {
  %0 = "ipu.matmul"(%a, %b) : (tensor<7x1x2x3xf32>, tensor<5x3x4xf32>) -> tensor<7x5x2x4xf32>
  %1 = "ipu.matmul"(%0, %w) : (tensor<7x5x2x4xf32>, tensor<4x6xf32>) -> tensor<7x5x2x6xf32>
  return %1 : tensor<7x5x2x6xf32>
}

// CHECK-LABEL: func.func @matmul$dynamic(
// CHECK-SAME:      %[[A:.*]]: tensor<?x?x3xf32>, %[[B:.*]]: tensor<?x4xf32>) -> tensor<?x?x4xf32>
// CHECK-NEXT:    %[[C:.*]] = "ipu.matmul"(%[[A]], %[[B]]) : (tensor<?x?x3xf32>, tensor<?x4xf32>) -> tensor<?x?x4xf32>
// CHECK-NEXT:    return %[[C]] : tensor<?x?x4xf32>
func.func @matmul$dynamic(%a: tensor<?x?x3xf32>, %b: tensor<?x4xf32>) -> tensor<?x?x4xf32> {
  %0 = "ipu.matmul"(%a, %b) : (tensor<?x?x3xf32>, tensor<?x4xf32>) -> tensor<?x?x4xf32>
  return %0 : tensor<?x?x4xf32>
}
