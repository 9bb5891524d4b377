// RUN: ipu-opt %s --split-input-file --verify-diagnostics

// One case per way an op of dialects/reduction.py can fail to verify: its Python
// verifiers ("'ipu.x' op ..."), and an example of the IRDL constraints the classes
// declare (a missing attribute, an unranked operand), which IRDL reports in its own words.

//===----------------------------------------------------------------------===//
// ipu.reduce
//===----------------------------------------------------------------------===//

func.func @reduce$unknown_kind(%x: tensor<3x4xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'ipu.reduce' op attribute 'kind' must be one of "sum", "mean", "prod", "max", "min", "square_sum", "any", "all", got "median"}}
  %0 = "ipu.reduce"(%x) {kind = "median", dims = array<i64: 1>, keepdim = false} : (tensor<3x4xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @reduce$dims_not_i64(%x: tensor<3x4xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'ipu.reduce' op attribute 'dims' must be an array<i64: ...>, got array<i32: 1>}}
  %0 = "ipu.reduce"(%x) {kind = "sum", dims = array<i32: 1>, keepdim = false} : (tensor<3x4xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @reduce$keepdim_not_bool(%x: tensor<3x4xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'ipu.reduce' op attribute 'keepdim' must be true or false, got 0 : i64}}
  %0 = "ipu.reduce"(%x) {kind = "sum", dims = array<i64: 1>, keepdim = 0 : i64} : (tensor<3x4xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @reduce$dim_out_of_range(%x: tensor<3x4xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'ipu.reduce' op dims [2] must be increasing dimensions of the rank-2 operand}}
  %0 = "ipu.reduce"(%x) {kind = "sum", dims = array<i64: 2>, keepdim = false} : (tensor<3x4xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @reduce$dims_not_increasing(%x: tensor<3x4xf32>) -> tensor<f32> {
  // expected-error @+1 {{'ipu.reduce' op dims [1, 0] must be increasing dimensions of the rank-2 operand}}
  %0 = "ipu.reduce"(%x) {kind = "sum", dims = array<i64: 1, 0>, keepdim = false} : (tensor<3x4xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @reduce$element_type_changes(%x: tensor<3x4xf16>) -> tensor<3xf32> {
  // a max does not widen (only sums, means and sums of squares of halves into f32)
  // expected-error @+1 {{'ipu.reduce' op element type changes from f16 to f32}}
  %0 = "ipu.reduce"(%x) {kind = "max", dims = array<i64: 1>, keepdim = false} : (tensor<3x4xf16>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @reduce$narrowing_sum(%x: tensor<3x4xf32>) -> tensor<3xf16> {
  // expected-error @+1 {{'ipu.reduce' op element type changes from f32 to f16}}
  %0 = "ipu.reduce"(%x) {kind = "sum", dims = array<i64: 1>, keepdim = false} : (tensor<3x4xf32>) -> tensor<3xf16>
  return %0 : tensor<3xf16>
}

// -----

func.func @reduce$any_of_floats(%x: tensor<3x4xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'ipu.reduce' op reduction "any" needs i1 elements, got f32}}
  %0 = "ipu.reduce"(%x) {kind = "any", dims = array<i64: 1>, keepdim = false} : (tensor<3x4xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @reduce$sum_of_booleans(%x: tensor<3x4xi1>) -> tensor<3xi1> {
  // expected-error @+1 {{'ipu.reduce' op reduction "sum" does not take i1 elements; cast them first}}
  %0 = "ipu.reduce"(%x) {kind = "sum", dims = array<i64: 1>, keepdim = false} : (tensor<3x4xi1>) -> tensor<3xi1>
  return %0 : tensor<3xi1>
}

// -----

func.func @reduce$mean_of_integers(%x: tensor<3x4xi32>) -> tensor<3xi32> {
  // expected-error @+1 {{'ipu.reduce' op reduction "mean" needs float elements, got i32}}
  %0 = "ipu.reduce"(%x) {kind = "mean", dims = array<i64: 1>, keepdim = false} : (tensor<3x4xi32>) -> tensor<3xi32>
  return %0 : tensor<3xi32>
}

// -----

func.func @reduce$keepdim_shape(%x: tensor<3x4xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'ipu.reduce' op result shape 3 should be 3x1}}
  %0 = "ipu.reduce"(%x) {kind = "max", dims = array<i64: 1>, keepdim = true} : (tensor<3x4xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @reduce$missing_keepdim(%x: tensor<3x4xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'ipu.reduce' op attribute "keepdim" is expected but not provided}}
  %0 = "ipu.reduce"(%x) {kind = "sum", dims = array<i64: 1>} : (tensor<3x4xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @reduce$kind_not_a_string(%x: tensor<3x4xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'ipu.reduce' op attribute 'kind' must be a string, got 1 : i64}}
  %0 = "ipu.reduce"(%x) {kind = 1 : i64, dims = array<i64: 1>, keepdim = false} : (tensor<3x4xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

//===----------------------------------------------------------------------===//
// ipu.arg_max, ipu.arg_min
//===----------------------------------------------------------------------===//

func.func @arg_max$negative_dim(%x: tensor<3x4xf32>) -> tensor<3xi32> {
  // expected-error @+1 {{'ipu.arg_max' op attribute 'dim' must be >= 0, got -1}}
  %0 = "ipu.arg_max"(%x) {dim = -1 : i64, keepdim = false} : (tensor<3x4xf32>) -> tensor<3xi32>
  return %0 : tensor<3xi32>
}

// -----

func.func @arg_max$dim_out_of_range(%x: tensor<3x4xf32>) -> tensor<3xi32> {
  // expected-error @+1 {{'ipu.arg_max' op dim 2 is out of range for an operand of rank 2}}
  %0 = "ipu.arg_max"(%x) {dim = 2 : i64, keepdim = false} : (tensor<3x4xf32>) -> tensor<3xi32>
  return %0 : tensor<3xi32>
}

// -----

func.func @arg_min$keepdim_not_bool(%x: tensor<3x4xf32>) -> tensor<3xi32> {
  // expected-error @+1 {{'ipu.arg_min' op attribute 'keepdim' must be true or false, got 1 : i64}}
  %0 = "ipu.arg_min"(%x) {dim = 1 : i64, keepdim = 1 : i64} : (tensor<3x4xf32>) -> tensor<3xi32>
  return %0 : tensor<3xi32>
}

// -----

func.func @arg_min$float_indices(%x: tensor<3x4xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{'ipu.arg_min' op result element type must be i32 or i64, got f32}}
  %0 = "ipu.arg_min"(%x) {dim = 1 : i64, keepdim = false} : (tensor<3x4xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

func.func @arg_max$shape(%x: tensor<3x4xf32>) -> tensor<4xi64> {
  // expected-error @+1 {{'ipu.arg_max' op result shape 4 should be 3}}
  %0 = "ipu.arg_max"(%x) {dim = 1 : i64, keepdim = false} : (tensor<3x4xf32>) -> tensor<4xi64>
  return %0 : tensor<4xi64>
}

// -----

//===----------------------------------------------------------------------===//
// ipu.cumsum, ipu.cumprod
//===----------------------------------------------------------------------===//

func.func @cumsum$dim_out_of_range(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  // expected-error @+1 {{'ipu.cumsum' op dim 2 is out of range for an operand of rank 2}}
  %0 = "ipu.cumsum"(%x) {dim = 2 : i64} : (tensor<3x4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

func.func @cumsum$type_changes(%x: tensor<3x4xi32>) -> tensor<3x4xi64> {
  // expected-error @+1 {{'ipu.cumsum' op result type tensor<3x4xi64> differs from operand type tensor<3x4xi32>}}
  %0 = "ipu.cumsum"(%x) {dim = 0 : i64} : (tensor<3x4xi32>) -> tensor<3x4xi64>
  return %0 : tensor<3x4xi64>
}

// -----

func.func @cumprod$booleans(%x: tensor<3x4xi1>) -> tensor<3x4xi1> {
  // expected-error @+1 {{'ipu.cumprod' op cannot scan i1 elements; cast them to an integer type first}}
  %0 = "ipu.cumprod"(%x) {dim = 0 : i64} : (tensor<3x4xi1>) -> tensor<3x4xi1>
  return %0 : tensor<3x4xi1>
}

// -----

func.func @cumprod$unranked(%x: tensor<*xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.unranked_tensor'}}
  %0 = "ipu.cumprod"(%x) {dim = 0 : i64} : (tensor<*xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}
