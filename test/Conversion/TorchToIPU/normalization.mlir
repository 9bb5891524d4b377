// RUN: ipu-opt %s --ipu-convert-torch-to-ipu --canonicalize --split-input-file | FileCheck %s

// One function per lowering of passes/conversion/normalization.py.

// aten.norm.Scalar (weight_norm with dim=None): the 2-norm of every element, as the
// square root of the sum of squares.
// CHECK-LABEL: func.func @norm$scalar
// CHECK:         %[[X:.*]] = torch_c.to_builtin_tensor %arg0
// CHECK-NEXT:    %[[S:.*]] = "ipu.reduce"(%[[X]]) {dims = array<i64: 0, 1, 2>, keepdim = false, kind = "square_sum"} : (tensor<3x2x3xf32>) -> tensor<f32>
// CHECK-NEXT:    %[[N:.*]] = "ipu.sqrt"(%[[S]]) : (tensor<f32>) -> tensor<f32>
// CHECK-NEXT:    torch_c.from_builtin_tensor %[[N]]
func.func @norm$scalar(%v: !torch.vtensor<[3,2,3],f32>) -> !torch.vtensor<[],f32> {
  %int2 = torch.constant.int 2
  %0 = torch.aten.norm.Scalar %v, %int2 : !torch.vtensor<[3,2,3],f32>, !torch.int -> !torch.vtensor<[],f32>
  return %0 : !torch.vtensor<[],f32>
}

// -----

// Any other order: |x|^p summed, to the power 1/p.
// CHECK-LABEL: func.func @norm$order3
// CHECK:         "ipu.abs"
// CHECK:         "ipu.pow"
// CHECK:         "ipu.reduce"(%{{.*}}) {dims = array<i64: 0, 1>, keepdim = false, kind = "sum"} : (tensor<4x5xf32>) -> tensor<f32>
// CHECK:         "ipu.pow"
func.func @norm$order3(%v: !torch.vtensor<[4,5],f32>) -> !torch.vtensor<[],f32> {
  %int3 = torch.constant.int 3
  %0 = torch.aten.norm.Scalar %v, %int3 : !torch.vtensor<[4,5],f32>, !torch.int -> !torch.vtensor<[],f32>
  return %0 : !torch.vtensor<[],f32>
}
