// RUN: ipu-opt %s --ipu-convert-torch-to-ipu --canonicalize --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @unary
// CHECK:         %[[X:.*]] = torch_c.to_builtin_tensor %arg0 : !torch.vtensor<[4],f32> -> tensor<4xf32>
// CHECK-NEXT:    %[[E:.*]] = "ipu.exp"(%[[X]]) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[R:.*]] = "ipu.relu"(%[[E]]) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    torch_c.from_builtin_tensor %[[R]]
func.func @unary(%x: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32> {
  %0 = torch.aten.exp %x : !torch.vtensor<[4],f32> -> !torch.vtensor<[4],f32>
  %1 = torch.aten.relu %0 : !torch.vtensor<[4],f32> -> !torch.vtensor<[4],f32>
  return %1 : !torch.vtensor<[4],f32>
}

// -----

// add.Tensor with alpha: the second operand is scaled first; the int scalar becomes a
// 0-d constant of the result's element type.
// CHECK-LABEL: func.func @add$alpha
// CHECK-DAG:     %[[A:.*]] = torch_c.to_builtin_tensor %arg0
// CHECK-DAG:     %[[B:.*]] = torch_c.to_builtin_tensor %arg1
// CHECK-DAG:     %[[TWO:.*]] = "ipu.constant"() {value = dense<2.000000e+00> : tensor<f32>} : () -> tensor<f32>
// CHECK:         %[[S:.*]] = "ipu.mul"(%[[B]], %[[TWO]]) : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
// CHECK-NEXT:    "ipu.add"(%[[A]], %[[S]]) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
func.func @add$alpha(%a: !torch.vtensor<[2,3],f32>, %b: !torch.vtensor<[3],f32>) -> !torch.vtensor<[2,3],f32> {
  %int2 = torch.constant.int 2
  %0 = torch.aten.add.Tensor %a, %b, %int2 : !torch.vtensor<[2,3],f32>, !torch.vtensor<[3],f32>, !torch.int -> !torch.vtensor<[2,3],f32>
  return %0 : !torch.vtensor<[2,3],f32>
}

// -----

// Mixed types: the int operand is cast to the promoted (result) type; a comparison
// with a float scalar compares in float and gives i1.
// CHECK-LABEL: func.func @promotion
// CHECK:         %[[I:.*]] = "ipu.cast"(%{{.*}}) : (tensor<3xi32>) -> tensor<3xf32>
// CHECK:         "ipu.mul"(%{{.*}}, %[[I]]) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
// CHECK:         %[[F:.*]] = "ipu.cast"(%{{.*}}) : (tensor<3xi32>) -> tensor<3xf32>
// CHECK:         "ipu.gt"(%[[F]], %{{.*}}) : (tensor<3xf32>, tensor<f32>) -> tensor<3xi1>
func.func @promotion(%a: !torch.vtensor<[3],f32>, %i: !torch.vtensor<[3],si32>) -> (!torch.vtensor<[3],f32>, !torch.vtensor<[3],i1>) {
  %half = torch.constant.float 5.000000e-01
  %0 = torch.aten.mul.Tensor %a, %i : !torch.vtensor<[3],f32>, !torch.vtensor<[3],si32> -> !torch.vtensor<[3],f32>
  %1 = torch.aten.gt.Scalar %i, %half : !torch.vtensor<[3],si32>, !torch.float -> !torch.vtensor<[3],i1>
  return %0, %1 : !torch.vtensor<[3],f32>, !torch.vtensor<[3],i1>
}

// -----

// CHECK-LABEL: func.func @where$scalar
// CHECK:         %[[Z:.*]] = "ipu.constant"() {value = dense<0.000000e+00> : tensor<f32>}
// CHECK:         "ipu.select"(%{{.*}}, %{{.*}}, %[[Z]]) : (tensor<4xi1>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
func.func @where$scalar(%c: !torch.vtensor<[4],i1>, %x: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32> {
  %zero = torch.constant.float 0.000000e+00
  %0 = torch.aten.where.ScalarOther %c, %x, %zero : !torch.vtensor<[4],i1>, !torch.vtensor<[4],f32>, !torch.float -> !torch.vtensor<[4],f32>
  return %0 : !torch.vtensor<[4],f32>
}
