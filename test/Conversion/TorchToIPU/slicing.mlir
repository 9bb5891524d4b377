// RUN: ipu-opt %s --ipu-convert-poptorch-ops --canonicalize --split-input-file | FileCheck %s

// poptorch.dynamic_slice and dynamic_update (passes/conversion/slicing.py): the start
// stays an operand, read when the program runs.

// CHECK-LABEL: func.func @dynamic_slice
// CHECK:         %[[X:.*]] = torch_c.to_builtin_tensor %arg0 : !torch.vtensor<[8,3],f32> -> tensor<8x3xf32>
// CHECK-NEXT:    %[[I:.*]] = torch_c.to_builtin_tensor %arg1 : !torch.vtensor<[1],si32> -> tensor<1xi32>
// CHECK-NEXT:    %[[S:.*]] = "ipu.dynamic_slice"(%[[X]], %[[I]]) {dim = 0 : i64, size = 2 : i64} : (tensor<8x3xf32>, tensor<1xi32>) -> tensor<2x3xf32>
// CHECK-NEXT:    torch_c.from_builtin_tensor %[[S]] : tensor<2x3xf32> -> !torch.vtensor<[2,3],f32>
func.func @dynamic_slice(%x: !torch.vtensor<[8,3],f32>, %i: !torch.vtensor<[1],si32>) -> !torch.vtensor<[2,3],f32> {
  %int0 = torch.constant.int 0
  %int2 = torch.constant.int 2
  %int1 = torch.constant.int 1
  %0 = torch.operator "torch.poptorch.dynamic_slice"(%x, %int0, %i, %int2, %int1) : (!torch.vtensor<[8,3],f32>, !torch.int, !torch.vtensor<[1],si32>, !torch.int, !torch.int) -> !torch.vtensor<[2,3],f32>
  return %0 : !torch.vtensor<[2,3],f32>
}

// -----

// A strided slice is the dynamic slice of `size` elements, then every `step`-th of them
// (PopTorch's subsampleSlice); a negative dim counts from the end; a 0-d start becomes
// one element.
// CHECK-LABEL: func.func @dynamic_slice$step
// CHECK:         %[[X:.*]] = torch_c.to_builtin_tensor %arg0 : !torch.vtensor<[2,8],f32> -> tensor<2x8xf32>
// CHECK-NEXT:    %[[I:.*]] = torch_c.to_builtin_tensor %arg1 : !torch.vtensor<[],si64> -> tensor<i64>
// CHECK-NEXT:    %[[I1:.*]] = "ipu.reshape"(%[[I]]) : (tensor<i64>) -> tensor<1xi64>
// CHECK-NEXT:    %[[S:.*]] = "ipu.dynamic_slice"(%[[X]], %[[I1]]) {dim = 1 : i64, size = 4 : i64} : (tensor<2x8xf32>, tensor<1xi64>) -> tensor<2x4xf32>
// CHECK-NEXT:    %[[T:.*]] = "ipu.slice"(%[[S]]) {ends = array<i64: 2, 4>, starts = array<i64: 0, 0>, steps = array<i64: 1, 3>} : (tensor<2x4xf32>) -> tensor<2x2xf32>
// CHECK-NEXT:    torch_c.from_builtin_tensor %[[T]] : tensor<2x2xf32> -> !torch.vtensor<[2,2],f32>
func.func @dynamic_slice$step(%x: !torch.vtensor<[2,8],f32>, %i: !torch.vtensor<[],si64>) -> !torch.vtensor<[2,2],f32> {
  %dim = torch.constant.int -1
  %int4 = torch.constant.int 4
  %int3 = torch.constant.int 3
  %0 = torch.operator "torch.poptorch.dynamic_slice"(%x, %dim, %i, %int4, %int3) : (!torch.vtensor<[2,8],f32>, !torch.int, !torch.vtensor<[],si64>, !torch.int, !torch.int) -> !torch.vtensor<[2,2],f32>
  return %0 : !torch.vtensor<[2,2],f32>
}

// -----

// CHECK-LABEL: func.func @dynamic_update
// CHECK:         %[[X:.*]] = torch_c.to_builtin_tensor %arg0 : !torch.vtensor<[2,8],f32> -> tensor<2x8xf32>
// CHECK-NEXT:    %[[U:.*]] = torch_c.to_builtin_tensor %arg1 : !torch.vtensor<[2,1],f32> -> tensor<2x1xf32>
// CHECK-NEXT:    %[[I:.*]] = torch_c.to_builtin_tensor %arg2 : !torch.vtensor<[1],si32> -> tensor<1xi32>
// CHECK-NEXT:    %[[R:.*]] = "ipu.dynamic_update"(%[[X]], %[[U]], %[[I]]) {dim = 1 : i64} : (tensor<2x8xf32>, tensor<2x1xf32>, tensor<1xi32>) -> tensor<2x8xf32>
// CHECK-NEXT:    torch_c.from_builtin_tensor %[[R]] : tensor<2x8xf32> -> !torch.vtensor<[2,8],f32>
func.func @dynamic_update(%x: !torch.vtensor<[2,8],f32>, %u: !torch.vtensor<[2,1],f32>, %i: !torch.vtensor<[1],si32>) -> !torch.vtensor<[2,8],f32> {
  %int1 = torch.constant.int 1
  %0 = torch.operator "torch.poptorch.dynamic_update"(%x, %u, %int1, %i, %int1) : (!torch.vtensor<[2,8],f32>, !torch.vtensor<[2,1],f32>, !torch.int, !torch.vtensor<[1],si32>, !torch.int) -> !torch.vtensor<[2,8],f32>
  return %0 : !torch.vtensor<[2,8],f32>
}
