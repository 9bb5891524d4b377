// RUN: ipu-opt %s --split-input-file --verify-diagnostics

// One case per way an op of dialects/custom.py can fail its Python verifier.

func.func @custom$gap(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ipu.custom' op operands must fill the first slots, got operandSegmentSizes [1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]}}
  %0 = "ipu.custom"(%x, %y) {op_name = "A", domain = "d", domain_version = 1 : i64, attrs = {}, gradient = false, operandSegmentSizes = array<i32: 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @custom$empty_name(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ipu.custom' op attribute 'op_name' must be a non-empty string}}
  %0 = "ipu.custom"(%x) {op_name = "", domain = "d", domain_version = 1 : i64, attrs = {}, gradient = false, operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

func.func @custom$no_result(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ipu.custom' op a custom op has at least one result}}
  "ipu.custom"(%x) {op_name = "A", domain = "d", domain_version = 1 : i64, attrs = {}, gradient = false, operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>) -> ()
  return
}

// -----

func.func @host_call$empty_id(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ipu.host_call' op attribute 'callback' must be a non-empty string}}
  %0 = "ipu.host_call"(%x) {callback = "", operandSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0>} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
