// RUN: ipu-opt %s --ipu-convert-torch-to-ipu --canonicalize --split-input-file | FileCheck %s

// pow by a constant exponent that PyTorch's CPU kernel computes with a cheaper op (and
// PopART's pow pattern turns into a square) lowers to that op: the same values, at its
// vector rate in the cost model.

// CHECK-LABEL: func.func @pow$square
// CHECK:         %[[X:.*]] = torch_c.to_builtin_tensor %arg0
// CHECK-NEXT:    "ipu.square"(%[[X]]) : (tensor<2x3xf16>) -> tensor<2x3xf16>
// CHECK-NOT:     ipu.pow
func.func @pow$square(%x: !torch.vtensor<[2,3],f16>) -> !torch.vtensor<[2,3],f16> {
  %float2 = torch.constant.float 2.000000e+00
  %0 = torch.aten.pow.Tensor_Scalar %x, %float2 : !torch.vtensor<[2,3],f16>, !torch.float -> !torch.vtensor<[2,3],f16>
  return %0 : !torch.vtensor<[2,3],f16>
}

// -----

// An integer exponent of 2 is a square too.
// CHECK-LABEL: func.func @pow$square_int_exponent
// CHECK:         "ipu.square"(%{{.*}}) : (tensor<4xf32>) -> tensor<4xf32>
func.func @pow$square_int_exponent(%x: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32> {
  %int2 = torch.constant.int 2
  %0 = torch.aten.pow.Tensor_Scalar %x, %int2 : !torch.vtensor<[4],f32>, !torch.int -> !torch.vtensor<[4],f32>
  return %0 : !torch.vtensor<[4],f32>
}

// -----

// CHECK-LABEL: func.func @pow$sqrt
// CHECK:         "ipu.sqrt"(%{{.*}}) : (tensor<4xf32>) -> tensor<4xf32>
func.func @pow$sqrt(%x: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32> {
  %half = torch.constant.float 5.000000e-01
  %0 = torch.aten.pow.Tensor_Scalar %x, %half : !torch.vtensor<[4],f32>, !torch.float -> !torch.vtensor<[4],f32>
  return %0 : !torch.vtensor<[4],f32>
}

// -----

// CHECK-LABEL: func.func @pow$rsqrt
// CHECK:         "ipu.rsqrt"(%{{.*}}) : (tensor<4xf32>) -> tensor<4xf32>
func.func @pow$rsqrt(%x: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32> {
  %e = torch.constant.float -5.000000e-01
  %0 = torch.aten.pow.Tensor_Scalar %x, %e : !torch.vtensor<[4],f32>, !torch.float -> !torch.vtensor<[4],f32>
  return %0 : !torch.vtensor<[4],f32>
}

// -----

// CHECK-LABEL: func.func @pow$reciprocal
// CHECK:         "ipu.reciprocal"(%{{.*}}) : (tensor<4xf32>) -> tensor<4xf32>
func.func @pow$reciprocal(%x: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32> {
  %e = torch.constant.float -1.000000e+00
  %0 = torch.aten.pow.Tensor_Scalar %x, %e : !torch.vtensor<[4],f32>, !torch.float -> !torch.vtensor<[4],f32>
  return %0 : !torch.vtensor<[4],f32>
}

// -----

// pow(x, 1) (in pow(x, 2)'s gradient) is x.
// CHECK-LABEL: func.func @pow$one
// CHECK-NEXT:    %[[X:.*]] = torch_c.to_builtin_tensor %arg0
// CHECK-NEXT:    %[[R:.*]] = torch_c.from_builtin_tensor %[[X]]
// CHECK-NEXT:    return %[[R]]
func.func @pow$one(%x: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32> {
  %e = torch.constant.float 1.000000e+00
  %0 = torch.aten.pow.Tensor_Scalar %x, %e : !torch.vtensor<[4],f32>, !torch.float -> !torch.vtensor<[4],f32>
  return %0 : !torch.vtensor<[4],f32>
}

// -----

// The cube is x * x * x, as PyTorch computes it in float32: a square, then a product
// with x.
// CHECK-LABEL: func.func @pow$cube
// CHECK:         %[[X:.*]] = torch_c.to_builtin_tensor %arg0
// CHECK-NEXT:    %[[S:.*]] = "ipu.square"(%[[X]]) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    "ipu.mul"(%[[S]], %[[X]]) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NOT:     ipu.pow
func.func @pow$cube(%x: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32> {
  %e = torch.constant.float 3.000000e+00
  %0 = torch.aten.pow.Tensor_Scalar %x, %e : !torch.vtensor<[4],f32>, !torch.float -> !torch.vtensor<[4],f32>
  return %0 : !torch.vtensor<[4],f32>
}

// -----

// CHECK-LABEL: func.func @pow$inverse_square
// CHECK:         %[[S:.*]] = "ipu.square"(%{{.*}}) : (tensor<4xf64>) -> tensor<4xf64>
// CHECK-NEXT:    "ipu.reciprocal"(%[[S]]) : (tensor<4xf64>) -> tensor<4xf64>
func.func @pow$inverse_square(%x: !torch.vtensor<[4],f64>) -> !torch.vtensor<[4],f64> {
  %e = torch.constant.float -2.000000e+00
  %0 = torch.aten.pow.Tensor_Scalar %x, %e : !torch.vtensor<[4],f64>, !torch.float -> !torch.vtensor<[4],f64>
  return %0 : !torch.vtensor<[4],f64>
}

// -----

// In float16 PyTorch rounds a cube once (in float32): it stays ipu.pow, as do other
// exponents and integer tensors (an integer square is exact either way).
// CHECK-LABEL: func.func @pow$cube_f16
// CHECK:         %[[C:.*]] = "ipu.constant"() {value = dense<3.000000e+00> : tensor<f16>}
// CHECK:         "ipu.pow"(%{{.*}}, %[[C]]) : (tensor<4xf16>, tensor<f16>) -> tensor<4xf16>
func.func @pow$cube_f16(%x: !torch.vtensor<[4],f16>) -> !torch.vtensor<[4],f16> {
  %e = torch.constant.float 3.000000e+00
  %0 = torch.aten.pow.Tensor_Scalar %x, %e : !torch.vtensor<[4],f16>, !torch.float -> !torch.vtensor<[4],f16>
  return %0 : !torch.vtensor<[4],f16>
}

// -----

// CHECK-LABEL: func.func @pow$other_exponent
// CHECK:         %[[C:.*]] = "ipu.constant"() {value = dense<4.000000e+00> : tensor<f32>}
// CHECK:         "ipu.pow"(%{{.*}}, %[[C]]) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
func.func @pow$other_exponent(%x: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32> {
  %e = torch.constant.float 4.000000e+00
  %0 = torch.aten.pow.Tensor_Scalar %x, %e : !torch.vtensor<[4],f32>, !torch.float -> !torch.vtensor<[4],f32>
  return %0 : !torch.vtensor<[4],f32>
}

// -----

// CHECK-LABEL: func.func @pow$int_tensor
// CHECK:         "ipu.pow"(%{{.*}}, %{{.*}}) : (tensor<4xi32>, tensor<i32>) -> tensor<4xi32>
func.func @pow$int_tensor(%x: !torch.vtensor<[4],si32>) -> !torch.vtensor<[4],si32> {
  %int2 = torch.constant.int 2
  %0 = torch.aten.pow.Tensor_Scalar %x, %int2 : !torch.vtensor<[4],si32>, !torch.int -> !torch.vtensor<[4],si32>
  return %0 : !torch.vtensor<[4],si32>
}

// -----

// A tensor exponent is a pow.
// CHECK-LABEL: func.func @pow$tensor_exponent
// CHECK:         "ipu.pow"(%{{.*}}, %{{.*}}) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
func.func @pow$tensor_exponent(%x: !torch.vtensor<[4],f32>, %e: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32> {
  %0 = torch.aten.pow.Tensor_Tensor %x, %e : !torch.vtensor<[4],f32>, !torch.vtensor<[4],f32> -> !torch.vtensor<[4],f32>
  return %0 : !torch.vtensor<[4],f32>
}
