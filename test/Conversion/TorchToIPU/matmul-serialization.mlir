// RUN: ipu-opt %s --ipu-convert-poptorch-ops --canonicalize --split-input-file | FileCheck %s

// poptorch.serializedMatMul (passes/conversion/matmul_serialization.py): one
// ipu.serialized_matmul carrying the mode, factor and keep_precision.

// CHECK-LABEL: func.func @serialized_matmul
// CHECK:         %[[A:.*]] = torch_c.to_builtin_tensor %arg0 : !torch.vtensor<[2,8,12],f16> -> tensor<2x8x12xf16>
// CHECK-NEXT:    %[[B:.*]] = torch_c.to_builtin_tensor %arg1 : !torch.vtensor<[12,16],f16> -> tensor<12x16xf16>
// CHECK-NEXT:    %[[C:.*]] = "ipu.serialized_matmul"(%[[A]], %[[B]]) {factor = 4 : i64, keep_precision = true, mode = "reducing_dim"} : (tensor<2x8x12xf16>, tensor<12x16xf16>) -> tensor<2x8x16xf16>
// CHECK-NEXT:    torch_c.from_builtin_tensor %[[C]] : tensor<2x8x16xf16> -> !torch.vtensor<[2,8,16],f16>
func.func @serialized_matmul(%a: !torch.vtensor<[2,8,12],f16>, %b: !torch.vtensor<[12,16],f16>) -> !torch.vtensor<[2,8,16],f16> {
  %mode = torch.constant.str "reducing_dim"
  %int4 = torch.constant.int 4
  %true = torch.constant.bool true
  %0 = torch.operator "torch.poptorch.serialized_matmul"(%a, %b, %mode, %int4, %true) : (!torch.vtensor<[2,8,12],f16>, !torch.vtensor<[12,16],f16>, !torch.str, !torch.int, !torch.bool) -> !torch.vtensor<[2,8,16],f16>
  return %0 : !torch.vtensor<[2,8,16],f16>
}

// -----

// CHECK-LABEL: func.func @serialized_matmul$output_channels
// CHECK:         "ipu.serialized_matmul"(%{{.*}}, %{{.*}}) {factor = 2 : i64, keep_precision = false, mode = "output_channels"} : (tensor<3x4xf32>, tensor<4x6xf32>) -> tensor<3x6xf32>
func.func @serialized_matmul$output_channels(%a: !torch.vtensor<[3,4],f32>, %b: !torch.vtensor<[4,6],f32>) -> !torch.vtensor<[3,6],f32> {
  %mode = torch.constant.str "output_channels"
  %int2 = torch.constant.int 2
  %false = torch.constant.bool false
  %0 = torch.operator "torch.poptorch.serialized_matmul"(%a, %b, %mode, %int2, %false) : (!torch.vtensor<[3,4],f32>, !torch.vtensor<[4,6],f32>, !torch.str, !torch.int, !torch.bool) -> !torch.vtensor<[3,6],f32>
  return %0 : !torch.vtensor<[3,6],f32>
}
