// RUN: ipu-opt %s --split-input-file --verify-diagnostics

// One case per way ipu.serialized_matmul (dialects/matmul_serialization.py) can fail to verify.

func.func @serialized_matmul$mode(%a: tensor<4x4xf32>, %b: tensor<4x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'ipu.serialized_matmul' op attribute 'mode' must be one of "input_channels", "reducing_dim", "output_channels", got "none"}}
  %0 = "ipu.serialized_matmul"(%a, %b) {mode = "none", factor = 2 : i64, keep_precision = false} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

func.func @serialized_matmul$factor(%a: tensor<4x6xf32>, %b: tensor<6x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'ipu.serialized_matmul' op factor 4 does not divide the reducing_dim dimension (6)}}
  %0 = "ipu.serialized_matmul"(%a, %b) {mode = "reducing_dim", factor = 4 : i64, keep_precision = false} : (tensor<4x6xf32>, tensor<6x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

func.func @serialized_matmul$zero(%a: tensor<4x6xf32>, %b: tensor<6x4xf32>) -> tensor<4x4xf32> {
  // expected-error @+1 {{'ipu.serialized_matmul' op attribute 'factor' must be >= 1, got 0}}
  %0 = "ipu.serialized_matmul"(%a, %b) {mode = "input_channels", factor = 0 : i64, keep_precision = false} : (tensor<4x6xf32>, tensor<6x4xf32>) -> tensor<4x4xf32>
  return %0 : tensor<4x4xf32>
}

// -----

func.func @serialized_matmul$shape(%a: tensor<4x6xf32>, %b: tensor<6x4xf32>) -> tensor<4x6xf32> {
  // expected-error @+1 {{'ipu.serialized_matmul' op result shape 4x6 should be 4x4}}
  %0 = "ipu.serialized_matmul"(%a, %b) {mode = "input_channels", factor = 2 : i64, keep_precision = false} : (tensor<4x6xf32>, tensor<6x4xf32>) -> tensor<4x6xf32>
  return %0 : tensor<4x6xf32>
}
