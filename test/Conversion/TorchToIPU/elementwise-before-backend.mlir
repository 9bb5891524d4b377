// RUN: ipu-opt %s --ipu-convert-poptorch-ops --canonicalize --split-input-file | FileCheck %s

// torch-mlir's backend pipeline decomposes fmod into a rounded quotient, which loses the
// remainder (float16 fmod(-8.477, -0.061) gave 0): BEFORE_BACKEND lowers it first, to the
// exact `ipu.fmod`, for a tensor or a scalar divisor.
// CHECK-LABEL: func.func @fmod
// CHECK:         %[[A:.*]] = torch_c.to_builtin_tensor %arg0 : !torch.vtensor<[2,3],f16> -> tensor<2x3xf16>
// CHECK-NEXT:    %[[B:.*]] = torch_c.to_builtin_tensor %arg1 : !torch.vtensor<[3],f16> -> tensor<3xf16>
// CHECK-NEXT:    "ipu.fmod"(%[[A]], %[[B]]) : (tensor<2x3xf16>, tensor<3xf16>) -> tensor<2x3xf16>
// CHECK:         %[[C:.*]] = "ipu.constant"() {value = dense<-3> : tensor<i32>} : () -> tensor<i32>
// CHECK-NEXT:    "ipu.fmod"(%{{.*}}, %[[C]]) : (tensor<4xi32>, tensor<i32>) -> tensor<4xi32>
// CHECK-NOT:     torch.aten.fmod
func.func @fmod(%a: !torch.vtensor<[2,3],f16>, %b: !torch.vtensor<[3],f16>, %i: !torch.vtensor<[4],si32>) -> (!torch.vtensor<[2,3],f16>, !torch.vtensor<[4],si32>) {
  %int-3 = torch.constant.int -3
  %0 = torch.aten.fmod.Tensor %a, %b : !torch.vtensor<[2,3],f16>, !torch.vtensor<[3],f16> -> !torch.vtensor<[2,3],f16>
  %1 = torch.aten.fmod.Scalar %i, %int-3 : !torch.vtensor<[4],si32>, !torch.int -> !torch.vtensor<[4],si32>
  return %0, %1 : !torch.vtensor<[2,3],f16>, !torch.vtensor<[4],si32>
}
