// RUN: ipu-opt %s --split-input-file --verify-diagnostics

// One case per way an op of dialects/convolution_backward.py can fail to verify.

func.func @conv_weight_grad$element_types(%x: tensor<1x3x8x8xf32>, %dy: tensor<1x4x6x6xf16>) -> tensor<4x3x3x3xf32> {
  // expected-error @+1 {{'ipu.conv_weight_grad' op element types differ: input f32, grad_output f16, result f32}}
  %0 = "ipu.conv_weight_grad"(%x, %dy) {strides = array<i64: 1, 1>, padding_low = array<i64: 0, 0>, padding_high = array<i64: 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<1x4x6x6xf16>) -> tensor<4x3x3x3xf32>
  return %0 : tensor<4x3x3x3xf32>
}

// -----

func.func @conv_weight_grad$dynamic(%x: tensor<?x3x8x8xf32>, %dy: tensor<1x4x6x6xf32>) -> tensor<4x3x3x3xf32> {
  // expected-error @+1 {{'ipu.conv_weight_grad' op convolutions need static shapes}}
  %0 = "ipu.conv_weight_grad"(%x, %dy) {strides = array<i64: 1, 1>, padding_low = array<i64: 0, 0>, padding_high = array<i64: 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<?x3x8x8xf32>, tensor<1x4x6x6xf32>) -> tensor<4x3x3x3xf32>
  return %0 : tensor<4x3x3x3xf32>
}

// -----

func.func @conv_weight_grad$rank(%x: tensor<1x3x8x8xf32>, %dy: tensor<1x4x6x6xf32>) -> tensor<4x3x3xf32> {
  // expected-error @+1 {{'ipu.conv_weight_grad' op input 1x3x8x8, grad_output 1x4x6x6 and result 4x3x3 must all have rank 2 + the number of spatial dimensions (at least 3)}}
  %0 = "ipu.conv_weight_grad"(%x, %dy) {strides = array<i64: 1, 1>, padding_low = array<i64: 0, 0>, padding_high = array<i64: 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<1x4x6x6xf32>) -> tensor<4x3x3xf32>
  return %0 : tensor<4x3x3xf32>
}

// -----

func.func @conv_weight_grad$groups(%x: tensor<1x3x8x8xf32>, %dy: tensor<1x4x6x6xf32>) -> tensor<4x1x3x3xf32> {
  // expected-error @+1 {{'ipu.conv_weight_grad' op input 1x3x8x8 and grad_output 1x4x6x6 need one batch size and channels that split into 2 groups}}
  %0 = "ipu.conv_weight_grad"(%x, %dy) {strides = array<i64: 1, 1>, padding_low = array<i64: 0, 0>, padding_high = array<i64: 0, 0>, dilations = array<i64: 1, 1>, groups = 2 : i64} : (tensor<1x3x8x8xf32>, tensor<1x4x6x6xf32>) -> tensor<4x1x3x3xf32>
  return %0 : tensor<4x1x3x3xf32>
}

// -----

func.func @conv_weight_grad$result(%x: tensor<1x4x8x8xf32>, %dy: tensor<1x4x6x6xf32>) -> tensor<4x4x3x3xf32> {
  // expected-error @+1 {{'ipu.conv_weight_grad' op result 4x4x3x3 should be (4, 2, kernel...)}}
  %0 = "ipu.conv_weight_grad"(%x, %dy) {strides = array<i64: 1, 1>, padding_low = array<i64: 0, 0>, padding_high = array<i64: 0, 0>, dilations = array<i64: 1, 1>, groups = 2 : i64} : (tensor<1x4x8x8xf32>, tensor<1x4x6x6xf32>) -> tensor<4x4x3x3xf32>
  return %0 : tensor<4x4x3x3xf32>
}

// -----

func.func @conv_weight_grad$grad_shape(%x: tensor<1x3x8x8xf32>, %dy: tensor<1x4x8x8xf32>) -> tensor<4x3x3x3xf32> {
  // expected-error @+1 {{'ipu.conv_weight_grad' op grad_output 1x4x8x8 should be 1x4x4x4, the shape of the convolution's output}}
  %0 = "ipu.conv_weight_grad"(%x, %dy) {strides = array<i64: 2, 2>, padding_low = array<i64: 1, 1>, padding_high = array<i64: 1, 1>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<1x4x8x8xf32>) -> tensor<4x3x3x3xf32>
  return %0 : tensor<4x3x3x3xf32>
}

// -----

func.func @conv_weight_grad$strides_count(%x: tensor<1x3x8x8xf32>, %dy: tensor<1x4x6x6xf32>) -> tensor<4x3x3x3xf32> {
  // expected-error @+1 {{'ipu.conv_weight_grad' op attribute 'strides' has 1 entries; expected 2, one per spatial dimension}}
  %0 = "ipu.conv_weight_grad"(%x, %dy) {strides = array<i64: 1>, padding_low = array<i64: 0, 0>, padding_high = array<i64: 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<1x4x6x6xf32>) -> tensor<4x3x3x3xf32>
  return %0 : tensor<4x3x3x3xf32>
}

// -----

func.func @max_pool_grad$grad_shape(%dy: tensor<1x3x4x4xf32>, %i: tensor<1x3x4x4xi64>) -> tensor<1x3x9x9xf32> {
  // expected-error @+1 {{'ipu.max_pool_grad' op grad_output 1x3x4x4 should be 1x3x5x5, the pooled shape of the result 1x3x9x9}}
  %0 = "ipu.max_pool_grad"(%dy, %i) {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = true} : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xi64>) -> tensor<1x3x9x9xf32>
  return %0 : tensor<1x3x9x9xf32>
}

// -----

func.func @max_pool_grad$indices(%dy: tensor<1x3x4x4xf32>, %i: tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf32> {
  // expected-error @+1 {{'ipu.max_pool_grad' op indices tensor<1x3x4x4xf32> must be integers of grad_output's shape}}
  %0 = "ipu.max_pool_grad"(%dy, %i) {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<1x3x4x4xf32>, tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf32>
  return %0 : tensor<1x3x8x8xf32>
}

// -----

func.func @max_pool_grad$padding(%dy: tensor<1x3x6x6xf32>, %i: tensor<1x3x6x6xi64>) -> tensor<1x3x8x8xf32> {
  // expected-error @+1 {{'ipu.max_pool_grad' op padding [2, 2] must be at most half of the window [3, 3] (with dilations [1, 1])}}
  %0 = "ipu.max_pool_grad"(%dy, %i) {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 2, 2>, dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<1x3x6x6xf32>, tensor<1x3x6x6xi64>) -> tensor<1x3x8x8xf32>
  return %0 : tensor<1x3x8x8xf32>
}

// -----

func.func @max_pool_grad$rank(%dy: tensor<3x4x4xf32>, %i: tensor<3x4x4xi64>) -> tensor<1x3x8x8xf32> {
  // expected-error @+1 {{'ipu.max_pool_grad' op result 1x3x8x8 must be static with a channel dimension before the 2 pooled ones, and have the rank of grad_output 3x4x4}}
  %0 = "ipu.max_pool_grad"(%dy, %i) {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<3x4x4xf32>, tensor<3x4x4xi64>) -> tensor<1x3x8x8xf32>
  return %0 : tensor<1x3x8x8xf32>
}

// -----

func.func @avg_pool_grad$element_type(%dy: tensor<1x3x4xf32>) -> tensor<1x3x8xf16> {
  // expected-error @+1 {{'ipu.avg_pool_grad' op element type changes from f32 to f16}}
  %0 = "ipu.avg_pool_grad"(%dy) {kernel = array<i64: 2>, strides = array<i64: 2>, padding = array<i64: 0>, ceil_mode = false, count_include_pad = true, divisor = 0 : i64} : (tensor<1x3x4xf32>) -> tensor<1x3x8xf16>
  return %0 : tensor<1x3x8xf16>
}

// -----

func.func @avg_pool_grad$divisor(%dy: tensor<1x3x4xf32>) -> tensor<1x3x8xf32> {
  // expected-error @+1 {{'ipu.avg_pool_grad' op attribute 'divisor' must be >= 0, got -1}}
  %0 = "ipu.avg_pool_grad"(%dy) {kernel = array<i64: 2>, strides = array<i64: 2>, padding = array<i64: 0>, ceil_mode = false, count_include_pad = true, divisor = -1 : i64} : (tensor<1x3x4xf32>) -> tensor<1x3x8xf32>
  return %0 : tensor<1x3x8xf32>
}

// -----

func.func @avg_pool_grad$grad_shape(%dy: tensor<1x3x4xf32>) -> tensor<1x3x8xf32> {
  // expected-error @+1 {{'ipu.avg_pool_grad' op grad_output 1x3x4 should be 1x3x8, the pooled shape of the result 1x3x8}}
  %0 = "ipu.avg_pool_grad"(%dy) {kernel = array<i64: 3>, strides = array<i64: 1>, padding = array<i64: 1>, ceil_mode = false, count_include_pad = true, divisor = 0 : i64} : (tensor<1x3x4xf32>) -> tensor<1x3x8xf32>
  return %0 : tensor<1x3x8xf32>
}

// -----

func.func @adaptive_avg_pool_grad$grad_shape(%dy: tensor<1x2x3x4xf32>) -> tensor<1x2x8x8xf32> {
  // expected-error @+1 {{'ipu.adaptive_avg_pool_grad' op grad_output 1x2x3x4 should be 1x2x3x5: the result's leading dims, then output_size}}
  %0 = "ipu.adaptive_avg_pool_grad"(%dy) {output_size = array<i64: 3, 5>} : (tensor<1x2x3x4xf32>) -> tensor<1x2x8x8xf32>
  return %0 : tensor<1x2x8x8xf32>
}

// -----

func.func @adaptive_avg_pool_grad$output_size(%dy: tensor<1x2x3x5xf32>) -> tensor<1x2x8x8xf32> {
  // expected-error @+1 {{'ipu.adaptive_avg_pool_grad' op attribute 'output_size' entries must be >= 1, got [3, 0]}}
  %0 = "ipu.adaptive_avg_pool_grad"(%dy) {output_size = array<i64: 3, 0>} : (tensor<1x2x3x5xf32>) -> tensor<1x2x8x8xf32>
  return %0 : tensor<1x2x8x8xf32>
}

// -----

func.func @adaptive_max_pool_with_indices$shape(%x: tensor<1x2x8xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x4xi64>) {
  // expected-error @+1 {{'ipu.adaptive_max_pool_with_indices' op result shape 1x2x4 should be 1x2x3}}
  %0:2 = "ipu.adaptive_max_pool_with_indices"(%x) {output_size = array<i64: 3>} : (tensor<1x2x8xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x4xi64>)
  return %0#0, %0#1 : tensor<1x2x4xf32>, tensor<1x2x4xi64>
}

// -----

func.func @adaptive_max_pool_with_indices$indices(%x: tensor<1x2x8xf32>) -> (tensor<1x2x3xf32>, tensor<1x2x3xf32>) {
  // expected-error @+1 {{'ipu.adaptive_max_pool_with_indices' op indices tensor<1x2x3xf32> must be integers of the output's shape}}
  %0:2 = "ipu.adaptive_max_pool_with_indices"(%x) {output_size = array<i64: 3>} : (tensor<1x2x8xf32>) -> (tensor<1x2x3xf32>, tensor<1x2x3xf32>)
  return %0#0, %0#1 : tensor<1x2x3xf32>, tensor<1x2x3xf32>
}
