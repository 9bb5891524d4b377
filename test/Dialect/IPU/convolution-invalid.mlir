// RUN: ipu-opt %s --split-input-file --verify-diagnostics

// One case per way an op of dialects/convolution.py can fail to verify.

func.func @conv$element_types(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf16> {
  // expected-error @+1 {{'ipu.conv' op element types differ: input f32, weight f32, result f16}}
  %0 = "ipu.conv"(%x, %w) {strides = array<i64: 1, 1>, padding_low = array<i64: 0, 0>, padding_high = array<i64: 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf16>
  return %0 : tensor<1x4x6x6xf16>
}

// -----

func.func @conv$dynamic(%x: tensor<?x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+1 {{'ipu.conv' op convolutions need static shapes}}
  %0 = "ipu.conv"(%x, %w) {strides = array<i64: 1, 1>, padding_low = array<i64: 0, 0>, padding_high = array<i64: 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<?x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv$rank(%x: tensor<3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+1 {{'ipu.conv' op input 3x8x8 and weight 4x3x3x3 must both have rank 2 + the number of spatial dimensions (at least 3)}}
  %0 = "ipu.conv"(%x, %w) {strides = array<i64: 1, 1>, padding_low = array<i64: 0, 0>, padding_high = array<i64: 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv$strides_count(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+1 {{'ipu.conv' op attribute 'strides' has 1 entries; expected 2, one per spatial dimension}}
  %0 = "ipu.conv"(%x, %w) {strides = array<i64: 1>, padding_low = array<i64: 0, 0>, padding_high = array<i64: 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv$zero_dilation(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+1 {{'ipu.conv' op attribute 'dilations' entries must be >= 1, got [1, 0]}}
  %0 = "ipu.conv"(%x, %w) {strides = array<i64: 1, 1>, padding_low = array<i64: 0, 0>, padding_high = array<i64: 0, 0>, dilations = array<i64: 1, 0>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv$strides_not_array(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+1 {{'ipu.conv' op attribute 'strides' must be an array<i64: ...>, got array<i32: 1, 1>}}
  %0 = "ipu.conv"(%x, %w) {strides = array<i32: 1, 1>, padding_low = array<i64: 0, 0>, padding_high = array<i64: 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv$groups(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+1 {{'ipu.conv' op attribute 'groups' must be >= 1, got 0}}
  %0 = "ipu.conv"(%x, %w) {strides = array<i64: 1, 1>, padding_low = array<i64: 0, 0>, padding_high = array<i64: 0, 0>, dilations = array<i64: 1, 1>, groups = 0 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv$groups_split(%x: tensor<1x3x8x8xf32>, %w: tensor<4x1x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+1 {{'ipu.conv' op 3 input channels do not split into 2 groups}}
  %0 = "ipu.conv"(%x, %w) {strides = array<i64: 1, 1>, padding_low = array<i64: 0, 0>, padding_high = array<i64: 0, 0>, dilations = array<i64: 1, 1>, groups = 2 : i64} : (tensor<1x3x8x8xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv$channels(%x: tensor<1x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32> {
  // expected-error @+1 {{'ipu.conv' op weight 4x2x3x3 should be (C_out, 3, kernel...) with C_out a multiple of 1 groups}}
  %0 = "ipu.conv"(%x, %w) {strides = array<i64: 1, 1>, padding_low = array<i64: 0, 0>, padding_high = array<i64: 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32>
  return %0 : tensor<1x4x6x6xf32>
}

// -----

func.func @conv$result(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32> {
  // expected-error @+1 {{'ipu.conv' op result shape 1x4x8x8 should be 1x4x6x6}}
  %0 = "ipu.conv"(%x, %w) {strides = array<i64: 1, 1>, padding_low = array<i64: 0, 0>, padding_high = array<i64: 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  return %0 : tensor<1x4x8x8xf32>
}

// -----

func.func @conv$empty(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x1x1xf32> {
  // expected-error @+1 {{'ipu.conv' op the output would be empty (1x4x-2x-2): the window is larger than the padded input}}
  %0 = "ipu.conv"(%x, %w) {strides = array<i64: 1, 1>, padding_low = array<i64: 0, 0>, padding_high = array<i64: 0, 0>, dilations = array<i64: 5, 5>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x1x1xf32>
  return %0 : tensor<1x4x1x1xf32>
}

// -----

func.func @conv_transpose$channels(%x: tensor<1x3x5xf32>, %w: tensor<2x4x3xf32>) -> tensor<1x4x10xf32> {
  // expected-error @+1 {{'ipu.conv_transpose' op weight 2x4x3 should be (3, C_out / groups, kernel...)}}
  %0 = "ipu.conv_transpose"(%x, %w) {strides = array<i64: 2>, padding = array<i64: 1>, output_padding = array<i64: 1>, dilations = array<i64: 1>, groups = 1 : i64} : (tensor<1x3x5xf32>, tensor<2x4x3xf32>) -> tensor<1x4x10xf32>
  return %0 : tensor<1x4x10xf32>
}

// -----

func.func @conv_transpose$output_padding(%x: tensor<1x3x5xf32>, %w: tensor<3x4x3xf32>) -> tensor<1x4x11xf32> {
  // expected-error @+1 {{'ipu.conv_transpose' op output_padding [2] must be smaller than the stride or the dilation in every dimension}}
  %0 = "ipu.conv_transpose"(%x, %w) {strides = array<i64: 2>, padding = array<i64: 1>, output_padding = array<i64: 2>, dilations = array<i64: 1>, groups = 1 : i64} : (tensor<1x3x5xf32>, tensor<3x4x3xf32>) -> tensor<1x4x11xf32>
  return %0 : tensor<1x4x11xf32>
}

// -----

func.func @conv_transpose$result(%x: tensor<1x3x5xf32>, %w: tensor<3x4x3xf32>) -> tensor<1x4x9xf32> {
  // expected-error @+1 {{'ipu.conv_transpose' op result shape 1x4x9 should be 1x4x10}}
  %0 = "ipu.conv_transpose"(%x, %w) {strides = array<i64: 2>, padding = array<i64: 1>, output_padding = array<i64: 1>, dilations = array<i64: 1>, groups = 1 : i64} : (tensor<1x3x5xf32>, tensor<3x4x3xf32>) -> tensor<1x4x9xf32>
  return %0 : tensor<1x4x9xf32>
}

// -----

func.func @max_pool$element_type(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf16> {
  // expected-error @+1 {{'ipu.max_pool' op element type changes from f32 to f16}}
  %0 = "ipu.max_pool"(%x) {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf16>
  return %0 : tensor<1x3x4x4xf16>
}

// -----

func.func @max_pool$empty_kernel(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf32> {
  // expected-error @+1 {{'ipu.max_pool' op attribute 'kernel' needs at least one entry}}
  %0 = "ipu.max_pool"(%x) {kernel = array<i64>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf32>
  return %0 : tensor<1x3x4x4xf32>
}

// -----

func.func @max_pool$rank(%x: tensor<8x8xf32>) -> tensor<1x3x4x4xf32> {
  // expected-error @+1 {{'ipu.max_pool' op input 8x8 must be static with a channel dimension before the 2 pooled ones}}
  %0 = "ipu.max_pool"(%x) {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<8x8xf32>) -> tensor<1x3x4x4xf32>
  return %0 : tensor<1x3x4x4xf32>
}

// -----

func.func @max_pool$padding(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x6x4xf32> {
  // expected-error @+1 {{'ipu.max_pool' op padding [2, 0] must be at most half of the window [2, 2] (with dilations [1, 1])}}
  %0 = "ipu.max_pool"(%x) {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 2, 0>, dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<1x3x8x8xf32>) -> tensor<1x3x6x4xf32>
  return %0 : tensor<1x3x6x4xf32>
}

// -----

func.func @max_pool$ceil_mode(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf32> {
  // expected-error @+1 {{'ipu.max_pool' op attribute 'ceil_mode' must be true or false, got 0 : i64}}
  %0 = "ipu.max_pool"(%x) {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = 0 : i64} : (tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf32>
  return %0 : tensor<1x3x4x4xf32>
}

// -----

func.func @max_pool$result(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x5x4xf32> {
  // expected-error @+1 {{'ipu.max_pool' op result shape 1x3x5x4 should be 1x3x4x4}}
  %0 = "ipu.max_pool"(%x) {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilations = array<i64: 1, 1>, ceil_mode = false} : (tensor<1x3x8x8xf32>) -> tensor<1x3x5x4xf32>
  return %0 : tensor<1x3x5x4xf32>
}

// -----

func.func @max_pool_with_indices$indices(%x: tensor<1x3x8xf32>) -> tensor<1x3x4xf32> {
  // expected-error @+1 {{'ipu.max_pool_with_indices' op indices tensor<1x3x4xf32> must be integers of the output's shape}}
  %0, %1 = "ipu.max_pool_with_indices"(%x) {kernel = array<i64: 2>, strides = array<i64: 2>, padding = array<i64: 0>, dilations = array<i64: 1>, ceil_mode = false} : (tensor<1x3x8xf32>) -> (tensor<1x3x4xf32>, tensor<1x3x4xf32>)
  return %0 : tensor<1x3x4xf32>
}

// -----

func.func @avg_pool$result(%x: tensor<1x3x8xf32>) -> tensor<1x3x4xf32> {
  // expected-error @+1 {{'ipu.avg_pool' op result shape 1x3x4 should be 1x3x5}}
  %0 = "ipu.avg_pool"(%x) {kernel = array<i64: 3>, strides = array<i64: 2>, padding = array<i64: 1>, ceil_mode = true, count_include_pad = true, divisor = 0 : i64} : (tensor<1x3x8xf32>) -> tensor<1x3x4xf32>
  return %0 : tensor<1x3x4xf32>
}

// -----

func.func @avg_pool$count_include_pad(%x: tensor<1x3x8xf32>) -> tensor<1x3x5xf32> {
  // expected-error @+1 {{'ipu.avg_pool' op attribute 'count_include_pad' must be true or false, got "yes"}}
  %0 = "ipu.avg_pool"(%x) {kernel = array<i64: 3>, strides = array<i64: 2>, padding = array<i64: 1>, ceil_mode = true, count_include_pad = "yes", divisor = 0 : i64} : (tensor<1x3x8xf32>) -> tensor<1x3x5xf32>
  return %0 : tensor<1x3x5xf32>
}

// -----

func.func @avg_pool$divisor(%x: tensor<1x3x8xf32>) -> tensor<1x3x5xf32> {
  // expected-error @+1 {{'ipu.avg_pool' op attribute 'divisor' must be >= 0, got -2}}
  %0 = "ipu.avg_pool"(%x) {kernel = array<i64: 3>, strides = array<i64: 2>, padding = array<i64: 1>, ceil_mode = true, count_include_pad = true, divisor = -2 : i64} : (tensor<1x3x8xf32>) -> tensor<1x3x5xf32>
  return %0 : tensor<1x3x5xf32>
}

// -----

func.func @adaptive_avg_pool$element_type(%x: tensor<1x2x8x8xf32>) -> tensor<1x2x3x5xf16> {
  // expected-error @+1 {{'ipu.adaptive_avg_pool' op element type changes from f32 to f16}}
  %0 = "ipu.adaptive_avg_pool"(%x) {output_size = array<i64: 3, 5>} : (tensor<1x2x8x8xf32>) -> tensor<1x2x3x5xf16>
  return %0 : tensor<1x2x3x5xf16>
}

// -----

func.func @adaptive_max_pool$zero_size(%x: tensor<1x2x8x8xf32>) -> tensor<1x2x3x5xf32> {
  // expected-error @+1 {{'ipu.adaptive_max_pool' op attribute 'output_size' entries must be >= 1, got [0, 5]}}
  %0 = "ipu.adaptive_max_pool"(%x) {output_size = array<i64: 0, 5>} : (tensor<1x2x8x8xf32>) -> tensor<1x2x3x5xf32>
  return %0 : tensor<1x2x3x5xf32>
}

// -----

func.func @adaptive_max_pool$rank(%x: tensor<8xf32>) -> tensor<1x2x3x5xf32> {
  // expected-error @+1 {{'ipu.adaptive_max_pool' op input 8 must be static with a channel dimension before the 2 pooled ones}}
  %0 = "ipu.adaptive_max_pool"(%x) {output_size = array<i64: 3, 5>} : (tensor<8xf32>) -> tensor<1x2x3x5xf32>
  return %0 : tensor<1x2x3x5xf32>
}

// -----

func.func @adaptive_avg_pool$result(%x: tensor<1x2x8x8xf32>) -> tensor<1x2x3x4xf32> {
  // expected-error @+1 {{'ipu.adaptive_avg_pool' op result shape 1x2x3x4 should be 1x2x3x5}}
  %0 = "ipu.adaptive_avg_pool"(%x) {output_size = array<i64: 3, 5>} : (tensor<1x2x8x8xf32>) -> tensor<1x2x3x4xf32>
  return %0 : tensor<1x2x3x4xf32>
}

// -----

func.func @pad$element_type(%x: tensor<2x3xf32>) -> tensor<2x6xi32> {
  // expected-error @+1 {{'ipu.pad' op element type changes from f32 to i32}}
  %0 = "ipu.pad"(%x) {low = array<i64: 0, 1>, high = array<i64: 0, 2>, value = 0.0 : f64, mode = "constant"} : (tensor<2x3xf32>) -> tensor<2x6xi32>
  return %0 : tensor<2x6xi32>
}

// -----

func.func @pad$dynamic(%x: tensor<?x3xf32>) -> tensor<2x6xf32> {
  // expected-error @+1 {{'ipu.pad' op pad needs a static input shape}}
  %0 = "ipu.pad"(%x) {low = array<i64: 0, 1>, high = array<i64: 0, 2>, value = 0.0 : f64, mode = "constant"} : (tensor<?x3xf32>) -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}

// -----

func.func @pad$entries(%x: tensor<2x3xf32>) -> tensor<2x6xf32> {
  // expected-error @+1 {{'ipu.pad' op attribute 'high' has 1 entries; expected 2, one per spatial dimension}}
  %0 = "ipu.pad"(%x) {low = array<i64: 0, 1>, high = array<i64: 2>, value = 0.0 : f64, mode = "constant"} : (tensor<2x3xf32>) -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}

// -----

func.func @pad$mode(%x: tensor<2x3xf32>) -> tensor<2x6xf32> {
  // expected-error @+1 {{'ipu.pad' op attribute 'mode' must be one of "constant", got "reflect"}}
  %0 = "ipu.pad"(%x) {low = array<i64: 0, 1>, high = array<i64: 0, 2>, value = 0.0 : f64, mode = "reflect"} : (tensor<2x3xf32>) -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}

// -----

func.func @pad$value(%x: tensor<2x3xf32>) -> tensor<2x6xf32> {
  // expected-error @+1 {{'ipu.pad' op attribute 'value' must be a float, got 0 : i64}}
  %0 = "ipu.pad"(%x) {low = array<i64: 0, 1>, high = array<i64: 0, 2>, value = 0 : i64, mode = "constant"} : (tensor<2x3xf32>) -> tensor<2x6xf32>
  return %0 : tensor<2x6xf32>
}

// -----

func.func @pad$result(%x: tensor<2x3xf32>) -> tensor<2x5xf32> {
  // expected-error @+1 {{'ipu.pad' op padding 2x3 by low [0, 1] and high [0, 2] gives 2x6, not 2x5}}
  %0 = "ipu.pad"(%x) {low = array<i64: 0, 1>, high = array<i64: 0, 2>, value = 0.0 : f64, mode = "constant"} : (tensor<2x3xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

func.func @upsample_nearest$element_type(%x: tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf16> {
  // expected-error @+1 {{'ipu.upsample_nearest' op element type changes from f32 to f16}}
  %0 = "ipu.upsample_nearest"(%x) {scales = array<f64: 2.0, 2.0>} : (tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf16>
  return %0 : tensor<1x3x8x8xf16>
}

// -----

func.func @upsample_nearest$scales_type(%x: tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf32> {
  // expected-error @+1 {{'ipu.upsample_nearest' op attribute 'scales' must be an array<f64: ...>, got array<i64: 2, 2>}}
  %0 = "ipu.upsample_nearest"(%x) {scales = array<i64: 2, 2>} : (tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf32>
  return %0 : tensor<1x3x8x8xf32>
}

// -----

func.func @upsample_nearest$rank(%x: tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf32> {
  // expected-error @+1 {{'ipu.upsample_nearest' op input 1x3x4x4 must be static with rank 2 + 1 (one scale per spatial dim)}}
  %0 = "ipu.upsample_nearest"(%x) {scales = array<f64: 2.0>} : (tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf32>
  return %0 : tensor<1x3x8x8xf32>
}

// -----

func.func @upsample_nearest$negative_scale(%x: tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf32> {
  // expected-error @+1 {{'ipu.upsample_nearest' op scales [2.0, -1.0] must be >= 0}}
  %0 = "ipu.upsample_nearest"(%x) {scales = array<f64: 2.0, -1.0>} : (tensor<1x3x4x4xf32>) -> tensor<1x3x8x8xf32>
  return %0 : tensor<1x3x8x8xf32>
}

// -----

func.func @upsample_nearest$leading(%x: tensor<1x3x4x4xf32>) -> tensor<1x4x8x8xf32> {
  // expected-error @+1 {{'ipu.upsample_nearest' op result 1x4x8x8 must keep the input's rank and leading dims 1x3}}
  %0 = "ipu.upsample_nearest"(%x) {scales = array<f64: 2.0, 2.0>} : (tensor<1x3x4x4xf32>) -> tensor<1x4x8x8xf32>
  return %0 : tensor<1x4x8x8xf32>
}

// -----

func.func @upsample_nearest$scaled_size(%x: tensor<1x3x4x4xf32>) -> tensor<1x3x8x9xf32> {
  // expected-error @+1 {{'ipu.upsample_nearest' op result shape 1x3x8x9 does not match input 1x3x4x4 scaled by [2.0, 2.0]}}
  %0 = "ipu.upsample_nearest"(%x) {scales = array<f64: 2.0, 2.0>} : (tensor<1x3x4x4xf32>) -> tensor<1x3x8x9xf32>
  return %0 : tensor<1x3x8x9xf32>
}
