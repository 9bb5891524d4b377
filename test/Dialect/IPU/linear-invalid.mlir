// RUN: ipu-opt %s --split-input-file --verify-diagnostics

// One case per way the op of dialects/linear.py (ipu.matmul) can fail to verify: its
// Python verifier ("'ipu.matmul' op ..."), then the IRDL constraints its class declares
// (operand counts, base types), which IRDL reports in its own words.

//===----------------------------------------------------------------------===//
// ipu.matmul
//===----------------------------------------------------------------------===//

func.func @matmul$rank_1(%a: tensor<3xf32>, %b: tensor<3x4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ipu.matmul' op operands must have rank >= 2, got 3 and 3x4}}
  %0 = "ipu.matmul"(%a, %b) : (tensor<3xf32>, tensor<3x4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @matmul$contracting_dims(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'ipu.matmul' op contracting dimensions differ: 2x3 and 2x3}}
  %0 = "ipu.matmul"(%a, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @matmul$batch_dims(%a: tensor<2x5x2x3xf32>, %b: tensor<3x3x4xf32>) -> tensor<2x5x2x4xf32> {
  // expected-error @+1 {{'ipu.matmul' op batch dimensions of 2x5x2x3 and 3x3x4 do not broadcast}}
  %0 = "ipu.matmul"(%a, %b) : (tensor<2x5x2x3xf32>, tensor<3x3x4xf32>) -> tensor<2x5x2x4xf32>
  return %0 : tensor<2x5x2x4xf32>
}

// -----

func.func @matmul$result_shape(%a: tensor<5x2x3xf32>, %b: tensor<3x4xf32>) -> tensor<5x2x5xf32> {
  // expected-error @+1 {{'ipu.matmul' op result shape 5x2x5 should be 5x2x4}}
  %0 = "ipu.matmul"(%a, %b) : (tensor<5x2x3xf32>, tensor<3x4xf32>) -> tensor<5x2x5xf32>
  return %0 : tensor<5x2x5xf32>
}

// -----

func.func @matmul$result_rank(%a: tensor<5x2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'ipu.matmul' op result shape 2x4 should be 5x2x4}}
  %0 = "ipu.matmul"(%a, %b) : (tensor<5x2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @matmul$element_types(%a: tensor<2x3xf32>, %b: tensor<3x4xf16>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'ipu.matmul' op element types differ: lhs f32, rhs f16, result f32}}
  %0 = "ipu.matmul"(%a, %b) : (tensor<2x3xf32>, tensor<3x4xf16>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @matmul$lhs_unranked(%a: tensor<*xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.unranked_tensor'}}
  %0 = "ipu.matmul"(%a, %b) : (tensor<*xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @matmul$rhs_unranked(%a: tensor<2x3xf32>, %b: tensor<*xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.unranked_tensor'}}
  %0 = "ipu.matmul"(%a, %b) : (tensor<2x3xf32>, tensor<*xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @matmul$result_unranked(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.unranked_tensor'}}
  %0 = "ipu.matmul"(%a, %b) : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @matmul$lhs_not_a_tensor(%a: f32, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.f32'}}
  %0 = "ipu.matmul"(%a, %b) : (f32, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @matmul$three_operands(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  // expected-error @below {{op expects exactly 2 operands, but got 3}}
  %0 = "ipu.matmul"(%a, %b, %b) : (tensor<2x3xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}
