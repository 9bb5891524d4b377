// RUN: ipu-opt %s | FileCheck %s
// RUN: ipu-opt %s | ipu-opt | FileCheck %s
// RUN: ipu-opt %s -o %t.1 && ipu-opt %t.1 -o %t.2 && diff %t.1 %t.2

// The unary and binary ops of dialects/elementwise.py parse, verify and print back in
// generic form; the second RUN line checks that the printed form parses to the same IR,
// the third that it prints the same again.

// CHECK-LABEL: func.func @unary(
// CHECK-SAME:      %[[X:.*]]: tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[NEG:.*]] = "ipu.neg"(%[[X]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[ABS:.*]] = "ipu.abs"(%[[NEG]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[EXP:.*]] = "ipu.exp"(%[[ABS]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[LOG:.*]] = "ipu.log"(%[[EXP]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[SQRT:.*]] = "ipu.sqrt"(%[[LOG]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[RSQRT:.*]] = "ipu.rsqrt"(%[[SQRT]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[TANH:.*]] = "ipu.tanh"(%[[RSQRT]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[SIGMOID:.*]] = "ipu.sigmoid"(%[[TANH]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[RELU:.*]] = "ipu.relu"(%[[SIGMOID]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[GELU:.*]] = "ipu.gelu"(%[[RELU]]) : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    return %[[GELU]] : tensor<2x3xf32>
func.func @unary(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = "ipu.neg"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1 = "ipu.abs"(%0) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %2 = "ipu.exp"(%1) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %3 = "ipu.log"(%2) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %4 = "ipu.sqrt"(%3) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %5 = "ipu.rsqrt"(%4) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %6 = "ipu.tanh"(%5) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %7 = "ipu.sigmoid"(%6) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %8 = "ipu.relu"(%7) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %9 = "ipu.gelu"(%8) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %9 : tensor<2x3xf32>
}

// CHECK-LABEL: func.func @unary$dynamic(
// CHECK-SAME:      %[[X:.*]]: tensor<?x?xi32>) -> tensor<?x?xi32>
// CHECK-NEXT:    %[[Y:.*]] = "ipu.abs"(%[[X]]) : (tensor<?x?xi32>) -> tensor<?x?xi32>
// CHECK-NEXT:    return %[[Y]] : tensor<?x?xi32>
func.func @unary$dynamic(%x: tensor<?x?xi32>) -> tensor<?x?xi32> {
  %0 = "ipu.abs"(%x) : (tensor<?x?xi32>) -> tensor<?x?xi32>
  return %0 : tensor<?x?xi32>
}

// CHECK-LABEL: func.func @binary(
// CHECK-SAME:      %[[X:.*]]: tensor<4xf32>, %[[Y:.*]]: tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[ADD:.*]] = "ipu.add"(%[[X]], %[[Y]]) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[SUB:.*]] = "ipu.sub"(%[[ADD]], %[[Y]]) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[MUL:.*]] = "ipu.mul"(%[[SUB]], %[[Y]]) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[DIV:.*]] = "ipu.div"(%[[MUL]], %[[Y]]) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[POW:.*]] = "ipu.pow"(%[[DIV]], %[[Y]]) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[MAX:.*]] = "ipu.max"(%[[POW]], %[[Y]]) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[MIN:.*]] = "ipu.min"(%[[MAX]], %[[Y]]) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    return %[[MIN]] : tensor<4xf32>
func.func @binary(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.add"(%x, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = "ipu.sub"(%0, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %2 = "ipu.mul"(%1, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %3 = "ipu.div"(%2, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %4 = "ipu.pow"(%3, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %5 = "ipu.max"(%4, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %6 = "ipu.min"(%5, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %6 : tensor<4xf32>
}

// NumPy broadcasting: size-1 and missing leading dimensions stretch.
// CHECK-LABEL: func.func @binary$broadcast(
// CHECK-SAME:      %[[X:.*]]: tensor<2x1x4xf32>, %[[Y:.*]]: tensor<3x1xf32>, %[[S:.*]]: tensor<f32>) -> tensor<2x3x4xf32>
// CHECK-NEXT:    %[[M:.*]] = "ipu.mul"(%[[X]], %[[Y]]) : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT:    %[[A:.*]] = "ipu.add"(%[[S]], %[[M]]) : (tensor<f32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT:    return %[[A]] : tensor<2x3x4xf32>
func.func @binary$broadcast(%x: tensor<2x1x4xf32>, %y: tensor<3x1xf32>, %s: tensor<f32>) -> tensor<2x3x4xf32> {
  %0 = "ipu.mul"(%x, %y) : (tensor<2x1x4xf32>, tensor<3x1xf32>) -> tensor<2x3x4xf32>
  %1 = "ipu.add"(%s, %0) : (tensor<f32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %1 : tensor<2x3x4xf32>
}

// A dynamic size may equal a static one at run time, and the result may stay dynamic.
// CHECK-LABEL: func.func @binary$dynamic(
// CHECK-SAME:      %[[X:.*]]: tensor<?x4xf32>, %[[Y:.*]]: tensor<3x?xf32>) -> tensor<3x?xf32>
// CHECK-NEXT:    %[[D:.*]] = "ipu.sub"(%[[X]], %[[Y]]) : (tensor<?x4xf32>, tensor<3x?xf32>) -> tensor<3x?xf32>
// CHECK-NEXT:    return %[[D]] : tensor<3x?xf32>
func.func @binary$dynamic(%x: tensor<?x4xf32>, %y: tensor<3x?xf32>) -> tensor<3x?xf32> {
  %0 = "ipu.sub"(%x, %y) : (tensor<?x4xf32>, tensor<3x?xf32>) -> tensor<3x?xf32>
  return %0 : tensor<3x?xf32>
}
