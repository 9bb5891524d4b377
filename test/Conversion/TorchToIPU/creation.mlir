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

// rand, randn, bernoulli and dropout all arrive as aten.uniform of an empty tensor.
// CHECK-LABEL: func.func @uniform
// CHECK:         "ipu.random_uniform"() {high = 1.000000e+00 : f64, low = 0.000000e+00 : f64} : () -> tensor<2x4xf32>
func.func @uniform(%x: !torch.vtensor<[2,4],f32>) -> !torch.vtensor<[2,4],f32> {
  %zero = torch.constant.float 0.000000e+00
  %one = torch.constant.float 1.000000e+00
  %none = torch.constant.none
  %0 = torch.aten.uniform %x, %zero, %one, %none : !torch.vtensor<[2,4],f32>, !torch.float, !torch.float, !torch.none -> !torch.vtensor<[2,4],f32>
  return %0 : !torch.vtensor<[2,4],f32>
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
