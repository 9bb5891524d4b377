// RUN: ipu-opt %s --split-input-file --verify-diagnostics

// One case per way a unary or binary op of dialects/elementwise.py can fail to verify:
// its Python verifiers ("'ipu.x' op ..."), then the IRDL constraints the op classes
// declare (operand/result counts, base types), which IRDL reports in its own words.

//===----------------------------------------------------------------------===//
// Unary elementwise ops
//===----------------------------------------------------------------------===//

func.func @unary$result_type(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+1 {{'ipu.exp' op result type tensor<4xf16> differs from operand type tensor<4xf32>}}
  %0 = "ipu.exp"(%x) : (tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

func.func @unary$result_shape(%x: tensor<4xf32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{'ipu.relu' op result type tensor<2x2xf32> differs from operand type tensor<4xf32>}}
  %0 = "ipu.relu"(%x) : (tensor<4xf32>) -> tensor<2x2xf32>
  return %0 : tensor<2x2xf32>
}

// -----

func.func @unary$unranked(%x: tensor<*xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.unranked_tensor'}}
  %0 = "ipu.neg"(%x) : (tensor<*xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @unary$not_a_tensor(%x: f32) -> f32 {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.f32'}}
  %0 = "ipu.sqrt"(%x) : (f32) -> f32
  return %0 : f32
}

// -----

func.func @unary$two_operands(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{op expects exactly 1 operands, but got 2}}
  %0 = "ipu.tanh"(%x, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @unary$no_operand() -> tensor<4xf32> {
  // expected-error @+1 {{op expects exactly 1 operands, but got 0}}
  %0 = "ipu.gelu"() : () -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Binary elementwise ops
//===----------------------------------------------------------------------===//

func.func @binary$element_types(%x: tensor<4xf32>, %y: tensor<4xi32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ipu.add' op element types differ: lhs f32, rhs i32, result f32}}
  %0 = "ipu.add"(%x, %y) : (tensor<4xf32>, tensor<4xi32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @binary$result_element_type(%x: tensor<4xf32>) -> tensor<4xf16> {
  // expected-error @+1 {{'ipu.mul' op element types differ: lhs f32, rhs f32, result f16}}
  %0 = "ipu.mul"(%x, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf16>
  return %0 : tensor<4xf16>
}

// -----

func.func @binary$no_broadcast(%x: tensor<4xf32>, %y: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // expected-error @+1 {{'ipu.sub' op operand shapes 4 and 2x3 do not broadcast}}
  %0 = "ipu.sub"(%x, %y) : (tensor<4xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @binary$result_rank(%x: tensor<4xf32>) -> tensor<2x4xf32> {
  // expected-error @+1 {{'ipu.div' op result shape 2x4 is not the broadcast shape 4 of its operands}}
  %0 = "ipu.div"(%x, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

func.func @binary$result_size(%x: tensor<3x1xf32>, %y: tensor<4xf32>) -> tensor<3x5xf32> {
  // expected-error @+1 {{'ipu.pow' op result shape 3x5 is not the broadcast shape 3x4 of its operands}}
  %0 = "ipu.pow"(%x, %y) : (tensor<3x1xf32>, tensor<4xf32>) -> tensor<3x5xf32>
  return %0 : tensor<3x5xf32>
}

// -----

func.func @binary$lhs_unranked(%x: tensor<*xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.unranked_tensor'}}
  %0 = "ipu.max"(%x, %y) : (tensor<*xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @binary$rhs_unranked(%x: tensor<4xf32>, %y: tensor<*xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.unranked_tensor'}}
  %0 = "ipu.min"(%x, %y) : (tensor<4xf32>, tensor<*xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @binary$result_unranked(%x: tensor<4xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.unranked_tensor'}}
  %0 = "ipu.add"(%x, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @binary$rhs_not_a_tensor(%x: tensor<4xf32>, %y: f32) -> tensor<4xf32> {
  // expected-error @+1 {{expected base type 'builtin.tensor' but got 'builtin.f32'}}
  %0 = "ipu.mul"(%x, %y) : (tensor<4xf32>, f32) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @binary$three_operands(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{op expects exactly 2 operands, but got 3}}
  %0 = "ipu.add"(%x, %x, %x) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @binary$one_operand(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{op expects exactly 2 operands, but got 1}}
  %0 = "ipu.add"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @binary$two_results(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{op expects exactly 1 results, but got 2}}
  %0:2 = "ipu.sub"(%x, %x) : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %0#0 : tensor<4xf32>
}
