// RUN: ipu-opt %s --ipu-convert-torch-to-ipu --canonicalize --split-input-file | FileCheck %s

// Shapes are static, so creation ops become constants computed at compile time.
// CHECK-LABEL: func.func @creation
// CHECK-DAG:     "ipu.constant"() {value = dense<[1, 3, 5]> : tensor<3xi64>} : () -> tensor<3xi64>
// CHECK-DAG:     "ipu.constant"() {value = dense<2.500000e+00> : tensor<2x2xf32>} : () -> tensor<2x2xf32>
// CHECK-DAG:     "ipu.constant"() {value = dense<0.000000e+00> : tensor<4xf32>} : () -> tensor<4xf32>
func.func @creation() -> (!torch.vtensor<[3],si64>, !torch.vtensor<[2,2],f32>, !torch.vtensor<[4],f32>) {
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int4 = torch.constant.int 4
  %int6 = torch.constant.int 6
  %float = torch.constant.float 2.500000e+00
  %none = torch.constant.none
  %0 = torch.aten.arange.start_step %int1, %int6, %int2, %none, %none, %none, %none : !torch.int, !torch.int, !torch.int, !torch.none, !torch.none, !torch.none, !torch.none -> !torch.vtensor<[3],si64>
  %s = torch.prim.ListConstruct %int2, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
  %1 = torch.aten.full %s, %float, %none, %none, %none, %none : !torch.list<int>, !torch.float, !torch.none, !torch.none, !torch.none, !torch.none -> !torch.vtensor<[2,2],f32>
  %s4 = torch.prim.ListConstruct %int4 : (!torch.int) -> !torch.list<int>
  %2 = torch.aten.zeros %s4, %none, %none, %none, %none : !torch.list<int>, !torch.none, !torch.none, !torch.none, !torch.none -> !torch.vtensor<[4],f32>
  return %0, %1, %2 : !torch.vtensor<[3],si64>, !torch.vtensor<[2,2],f32>, !torch.vtensor<[4],f32>
}

// -----

// CHECK-LABEL: func.func @literal
// CHECK:         "ipu.constant"() {value = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>} : () -> tensor<2xf32>
func.func @literal() -> !torch.vtensor<[2],f32> {
  %0 = torch.vtensor.literal(dense<[1.0, 2.0]> : tensor<2xf32>) : !torch.vtensor<[2],f32>
  return %0 : !torch.vtensor<[2],f32>
}

// -----

// A literal returned as it is: the conversion's folding turns its cast into an
// arith.constant first, which becomes an ipu.constant too.
// CHECK-LABEL: func.func @literal$returned
// CHECK-NOT:     arith.constant
// CHECK:         %[[C:.*]] = "ipu.constant"() {value = dense<6.000000e+00> : tensor<5xf32>} : () -> tensor<5xf32>
// CHECK-NEXT:    return %[[C]]
func.func @literal$returned() -> tensor<5xf32> {
  %0 = torch.vtensor.literal(dense<6.0> : tensor<5xf32>) : !torch.vtensor<[5],f32>
  %1 = torch_c.to_builtin_tensor %0 : !torch.vtensor<[5],f32> -> tensor<5xf32>
  return %1 : tensor<5xf32>
}

// -----

// Empty results: arange(1, 1), empty_strided (zeros((2, 0)) arrives as it), and any op
// whose results have no elements (a convolution over zero channels) are empty constants.
// CHECK-LABEL: func.func @empty
// CHECK-DAG:     "ipu.constant"() {value = dense<> : tensor<0xi64>} : () -> tensor<0xi64>
// CHECK-DAG:     "ipu.constant"() {value = dense<> : tensor<2x0xf32>} : () -> tensor<2x0xf32>
// CHECK-DAG:     "ipu.constant"() {value = dense<> : tensor<1x0x2x2xf32>} : () -> tensor<1x0x2x2xf32>
// CHECK-NOT:     "ipu.conv"
func.func @empty(%x: !torch.vtensor<[1,0,4,4],f32>, %w: !torch.vtensor<[2,0,3,3],f32>) -> (!torch.vtensor<[0],si64>, !torch.vtensor<[2,0],f32>, !torch.vtensor<[1,0,2,2],f32>) {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int6 = torch.constant.int 6
  %false = torch.constant.bool false
  %none = torch.constant.none
  %cpu = torch.constant.device "cpu"
  %0 = torch.aten.arange.start_step %int1, %int1, %int1, %none, %none, %none, %none : !torch.int, !torch.int, !torch.int, !torch.none, !torch.none, !torch.none, !torch.none -> !torch.vtensor<[0],si64>
  %size = torch.prim.ListConstruct %int2, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
  %stride = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %1 = torch.aten.empty_strided %size, %stride, %int6, %int0, %cpu, %false : !torch.list<int>, !torch.list<int>, !torch.int, !torch.int, !torch.Device, !torch.bool -> !torch.vtensor<[2,0],f32>
  %ones = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %zeros = torch.prim.ListConstruct %int0, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
  %2 = torch.aten.convolution %x, %w, %none, %ones, %zeros, %ones, %false, %zeros, %int1 : !torch.vtensor<[1,0,4,4],f32>, !torch.vtensor<[2,0,3,3],f32>, !torch.none, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int -> !torch.vtensor<[1,0,2,2],f32>
  return %0, %1, %2 : !torch.vtensor<[0],si64>, !torch.vtensor<[2,0],f32>, !torch.vtensor<[1,0,2,2],f32>
}

// -----

// A returned literal: its cast to a builtin tensor folds to an arith.constant, which
// becomes an ipu.constant too (the JIT runs ipu ops only).
// CHECK-LABEL: func.func @literal$returned
// CHECK-NEXT:    %[[C:.*]] = "ipu.constant"() {value = dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>} : () -> tensor<2xf32>
// CHECK-NEXT:    return %[[C]]
func.func @literal$returned() -> tensor<2xf32> {
  %0 = torch.vtensor.literal(dense<[1.0, 2.0]> : tensor<2xf32>) : !torch.vtensor<[2],f32>
  %1 = torch_c.to_builtin_tensor %0 : !torch.vtensor<[2],f32> -> tensor<2xf32>
  return %1 : tensor<2xf32>
}

// -----

// The greedy driver folds a literal read as a builtin tensor (a zero gradient) into an
// arith.constant before the literal's pattern runs: it becomes an ipu.constant too.
// CHECK-LABEL: func.func @literal$folded
// CHECK-NEXT:    %[[C:.*]] = "ipu.constant"() {value = dense<0.000000e+00> : tensor<2xf32>} : () -> tensor<2xf32>
// CHECK-NEXT:    return %[[C]]
func.func @literal$folded() -> tensor<2xf32> {
  %0 = torch.vtensor.literal(dense<0.0> : tensor<2xf32>) : !torch.vtensor<[2],f32>
  %1 = torch_c.to_builtin_tensor %0 : !torch.vtensor<[2],f32> -> tensor<2xf32>
  return %1 : tensor<2xf32>
}

// -----

// An empty one too (the op builder would take its empty attribute for a missing one).
// CHECK-LABEL: func.func @literal$folded_empty
// CHECK-NEXT:    %[[C:.*]] = "ipu.constant"() {value = dense<0.000000e+00> : tensor<1x0x3xf32>} : () -> tensor<1x0x3xf32>
// CHECK-NEXT:    return %[[C]]
func.func @literal$folded_empty() -> tensor<1x0x3xf32> {
  %0 = torch.vtensor.literal(dense<0.0> : tensor<1x0x3xf32>) : !torch.vtensor<[1,0,3],f32>
  %1 = torch_c.to_builtin_tensor %0 : !torch.vtensor<[1,0,3],f32> -> tensor<1x0x3xf32>
  return %1 : tensor<1x0x3xf32>
}
