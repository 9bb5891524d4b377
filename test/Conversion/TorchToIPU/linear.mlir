// RUN: ipu-opt %s --ipu-convert-torch-to-ipu --canonicalize --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @mm
// CHECK:         "ipu.matmul"(%{{.*}}, %{{.*}}) : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
func.func @mm(%a: !torch.vtensor<[2,3],f32>, %b: !torch.vtensor<[3,4],f32>) -> !torch.vtensor<[2,4],f32> {
  %0 = torch.aten.mm %a, %b : !torch.vtensor<[2,3],f32>, !torch.vtensor<[3,4],f32> -> !torch.vtensor<[2,4],f32>
  return %0 : !torch.vtensor<[2,4],f32>
}

// -----

// CHECK-LABEL: func.func @bmm
// CHECK:         "ipu.matmul"(%{{.*}}, %{{.*}}) : (tensor<5x2x3xf32>, tensor<5x3x4xf32>) -> tensor<5x2x4xf32>
func.func @bmm(%a: !torch.vtensor<[5,2,3],f32>, %b: !torch.vtensor<[5,3,4],f32>) -> !torch.vtensor<[5,2,4],f32> {
  %0 = torch.aten.bmm %a, %b : !torch.vtensor<[5,2,3],f32>, !torch.vtensor<[5,3,4],f32> -> !torch.vtensor<[5,2,4],f32>
  return %0 : !torch.vtensor<[5,2,4],f32>
}

// -----

// addmm(bias, a, b, beta=2, alpha=1): the product plus the scaled bias.
// CHECK-LABEL: func.func @addmm
// CHECK:         %[[BIAS:.*]] = torch_c.to_builtin_tensor %arg0
// CHECK:         %[[P:.*]] = "ipu.matmul"(%{{.*}}, %{{.*}}) : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    %[[TWO:.*]] = "ipu.constant"() {value = dense<2.000000e+00> : tensor<f32>}
// CHECK:         %[[SB:.*]] = "ipu.mul"(%[[BIAS]], %[[TWO]]) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
// CHECK-NEXT:    "ipu.add"(%[[P]], %[[SB]]) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
func.func @addmm(%bias: !torch.vtensor<[4],f32>, %a: !torch.vtensor<[2,3],f32>, %b: !torch.vtensor<[3,4],f32>) -> !torch.vtensor<[2,4],f32> {
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %0 = torch.aten.addmm %bias, %a, %b, %int2, %int1 : !torch.vtensor<[4],f32>, !torch.vtensor<[2,3],f32>, !torch.vtensor<[3,4],f32>, !torch.int, !torch.int -> !torch.vtensor<[2,4],f32>
  return %0 : !torch.vtensor<[2,4],f32>
}

// -----

// linear(x, w, b) = x @ w^T + b
// CHECK-LABEL: func.func @linear
// CHECK:         %[[T:.*]] = "ipu.permute"(%{{.*}}) {dims = array<i64: 1, 0>} : (tensor<4x3xf32>) -> tensor<3x4xf32>
// CHECK-NEXT:    %[[P:.*]] = "ipu.matmul"(%{{.*}}, %[[T]]) : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
// CHECK:         "ipu.add"(%[[P]], %{{.*}}) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
func.func @linear(%x: !torch.vtensor<[2,3],f32>, %w: !torch.vtensor<[4,3],f32>, %b: !torch.vtensor<[4],f32>) -> !torch.vtensor<[2,4],f32> {
  %0 = torch.aten.linear %x, %w, %b : !torch.vtensor<[2,3],f32>, !torch.vtensor<[4,3],f32>, !torch.vtensor<[4],f32> -> !torch.vtensor<[2,4],f32>
  return %0 : !torch.vtensor<[2,4],f32>
}
