// RUN: ipu-opt %s --ipu-convert-poptorch-ops --ipu-convert-torch-to-ipu --canonicalize --split-input-file | FileCheck %s

// Random draws come from the device's generator. rand, bernoulli, exponential and
// dropout arrive as aten.uniform of an empty tensor.
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

// randn and x.normal_(mean, std) are one ipu.random_normal each (poprand::normal), not
// torch-mlir's Box-Muller composition of two uniform draws.
// CHECK-LABEL: func.func @normal
// CHECK-DAG:     "ipu.random_normal"() {mean = 0.000000e+00 : f64, std = 1.000000e+00 : f64} : () -> tensor<2x4xf32>
// CHECK-DAG:     "ipu.random_normal"() {mean = 2.000000e+00 : f64, std = 5.000000e-01 : f64} : () -> tensor<3xf16>
// CHECK-NOT:     "ipu.random_uniform"
func.func @normal(%x: !torch.vtensor<[3],f16>) -> (!torch.vtensor<[2,4],f32>, !torch.vtensor<[3],f16>) {
  %int2 = torch.constant.int 2
  %int4 = torch.constant.int 4
  %two = torch.constant.float 2.000000e+00
  %half = torch.constant.float 5.000000e-01
  %none = torch.constant.none
  %size = torch.prim.ListConstruct %int2, %int4 : (!torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.aten.randn %size, %none, %none, %none, %none : !torch.list<int>, !torch.none, !torch.none, !torch.none, !torch.none -> !torch.vtensor<[2,4],f32>
  %1 = torch.aten.normal_functional %x, %two, %half, %none : !torch.vtensor<[3],f16>, !torch.float, !torch.float, !torch.none -> !torch.vtensor<[3],f16>
  return %0, %1 : !torch.vtensor<[2,4],f32>, !torch.vtensor<[3],f16>
}

// -----

// torch.normal(mean, std) with a tensor (no torch-mlir op): mean + std * N(0, 1) of the
// broadcast shape.
// CHECK-LABEL: func.func @normal$tensor_float
// CHECK:         %[[Z:.*]] = "ipu.random_normal"() {mean = 0.000000e+00 : f64, std = 1.000000e+00 : f64} : () -> tensor<2x3xf32>
// CHECK-NEXT:    %[[S:.*]] = "ipu.constant"() {value = dense<2.000000e+00> : tensor<f32>} : () -> tensor<f32>
// CHECK-NEXT:    %[[SZ:.*]] = "ipu.mul"(%[[S]], %[[Z]]) : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[M:.*]] = torch_c.to_builtin_tensor %arg0
// CHECK-NEXT:    "ipu.add"(%[[M]], %[[SZ]]) : (tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
func.func @normal$tensor_float(%mean: !torch.vtensor<[3],f32>) -> !torch.vtensor<[2,3],f32> {
  %two = torch.constant.float 2.000000e+00
  %none = torch.constant.none
  %0 = torch.operator "torch.aten.normal.Tensor_float"(%mean, %two, %none) : (!torch.vtensor<[3],f32>, !torch.float, !torch.none) -> !torch.vtensor<[2,3],f32>
  return %0 : !torch.vtensor<[2,3],f32>
}

// -----

// torch.normal(mean, std, size) with floats: one draw.
// CHECK-LABEL: func.func @normal$float_float
// CHECK:         "ipu.random_normal"() {mean = 1.000000e+00 : f64, std = 3.000000e+00 : f64} : () -> tensor<5xf32>
func.func @normal$float_float() -> !torch.vtensor<[5],f32> {
  %one = torch.constant.float 1.000000e+00
  %three = torch.constant.float 3.000000e+00
  %int5 = torch.constant.int 5
  %none = torch.constant.none
  %size = torch.prim.ListConstruct %int5 : (!torch.int) -> !torch.list<int>
  %0 = torch.operator "torch.aten.normal.float_float"(%one, %three, %size, %none, %none, %none, %none, %none) : (!torch.float, !torch.float, !torch.list<int>, !torch.none, !torch.none, !torch.none, !torch.none, !torch.none) -> !torch.vtensor<[5],f32>
  return %0 : !torch.vtensor<[5],f32>
}

// -----

// randperm(n) (no torch-mlir op): the order that sorts n uniform draws.
// CHECK-LABEL: func.func @randperm
// CHECK:         %[[U:.*]] = "ipu.random_uniform"() {high = 1.000000e+00 : f64, low = 0.000000e+00 : f64} : () -> tensor<8xf32>
// CHECK-NEXT:    %[[S:.*]]:2 = "ipu.sort"(%[[U]]) {descending = false, dim = 0 : i64} : (tensor<8xf32>) -> (tensor<8xf32>, tensor<8xi64>)
// CHECK-NEXT:    torch_c.from_builtin_tensor %[[S]]#1 : tensor<8xi64> -> !torch.vtensor<[8],si64>
func.func @randperm() -> !torch.vtensor<[8],si64> {
  %int8 = torch.constant.int 8
  %none = torch.constant.none
  %0 = torch.operator "torch.aten.randperm"(%int8, %none, %none, %none, %none) : (!torch.int, !torch.none, !torch.none, !torch.none, !torch.none) -> !torch.vtensor<[8],si64>
  return %0 : !torch.vtensor<[8],si64>
}

// -----

// Training-mode dropout: keep where a uniform draw is at least p, scaled by 1 / (1 - p);
// p = 1 keeps nothing and gives zeros (a scale of 0, not 1 / 0).
// CHECK-LABEL: func.func @native_dropout
// CHECK:         %[[U:.*]] = "ipu.random_uniform"() {high = 1.000000e+00 : f64, low = 0.000000e+00 : f64} : () -> tensor<4xf32>
// CHECK-NEXT:    %[[P:.*]] = "ipu.constant"() {value = dense<1.000000e+00> : tensor<f32>} : () -> tensor<f32>
// CHECK-NEXT:    %[[KEEP:.*]] = "ipu.ge"(%[[U]], %[[P]]) : (tensor<4xf32>, tensor<f32>) -> tensor<4xi1>
// CHECK:         "ipu.constant"() {value = dense<0.000000e+00> : tensor<f32>} : () -> tensor<f32>
// CHECK:         "ipu.select"(%[[KEEP]]
func.func @native_dropout(%x: !torch.vtensor<[4],f32>) -> (!torch.vtensor<[4],f32>, !torch.vtensor<[4],i1>) {
  %p = torch.constant.float 1.000000e+00
  %true = torch.constant.bool true
  %0:2 = torch.aten.native_dropout %x, %p, %true : !torch.vtensor<[4],f32>, !torch.float, !torch.bool -> !torch.vtensor<[4],f32>, !torch.vtensor<[4],i1>
  return %0#0, %0#1 : !torch.vtensor<[4],f32>, !torch.vtensor<[4],i1>
}
