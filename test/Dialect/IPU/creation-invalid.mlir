// RUN: ipu-opt %s --split-input-file --verify-diagnostics

func.func @random_uniform$integer() -> tensor<4xi32> {
  // expected-error @+1 {{'ipu.random_uniform' op result element type must be a float, got i32}}
  %0 = "ipu.random_uniform"() {low = 0.0 : f64, high = 1.0 : f64} : () -> tensor<4xi32>
  return %0 : tensor<4xi32>
}

// -----

func.func @random_uniform$empty_range() -> tensor<4xf32> {
  // expected-error @+1 {{'ipu.random_uniform' op low 2.0 is above high 1.0}}
  %0 = "ipu.random_uniform"() {low = 2.0 : f64, high = 1.0 : f64} : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @constant$type_mismatch() -> tensor<4xf32> {
  // expected-error @+1 {{'ipu.constant' op value of type tensor<2xf32> does not match the result type tensor<4xf32>}}
  %0 = "ipu.constant"() {value = dense<1.0> : tensor<2xf32>} : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @iota$dim() -> tensor<4xi32> {
  // expected-error @+1 {{'ipu.iota' op dim 1 is out of range for a result of rank 1}}
  %0 = "ipu.iota"() {dim = 1 : i64} : () -> tensor<4xi32>
  return %0 : tensor<4xi32>
}
