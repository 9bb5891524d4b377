// RUN: ipu-opt %s | ipu-opt | FileCheck %s

// Every op of dialects/convolution.py parses, verifies and prints back in generic form.

// Grouped, strided, dilated, with asymmetric low/high padding.
// CHECK-LABEL: func.func @conv
// CHECK:         "ipu.conv"(%arg0, %arg1) {dilations = array<i64: 1, 2>, groups = 2 : i64, padding_high = array<i64: 0, 1>, padding_low = array<i64: 1, 2>, strides = array<i64: 2, 1>} : (tensor<2x4x9x8xf32>, tensor<6x2x3x2xf32>) -> tensor<2x6x4x9xf32>
func.func @conv(%x: tensor<2x4x9x8xf32>, %w: tensor<6x2x3x2xf32>) -> tensor<2x6x4x9xf32> {
  %0 = "ipu.conv"(%x, %w) {strides = array<i64: 2, 1>, padding_low = array<i64: 1, 2>, padding_high = array<i64: 0, 1>, dilations = array<i64: 1, 2>, groups = 2 : i64} : (tensor<2x4x9x8xf32>, tensor<6x2x3x2xf32>) -> tensor<2x6x4x9xf32>
  return %0 : tensor<2x6x4x9xf32>
}

// Stride 2 with output_padding: (5 - 1) * 2 - 2 + 2 + 1 + 1 = 10.
// CHECK-LABEL: func.func @conv_transpose
// CHECK:         "ipu.conv_transpose"(%arg0, %arg1) {dilations = array<i64: 1>, groups = 1 : i64, output_padding = array<i64: 1>, padding = array<i64: 1>, strides = array<i64: 2>} : (tensor<1x3x5xf16>, tensor<3x4x3xf16>) -> tensor<1x4x10xf16>
func.func @conv_transpose(%x: tensor<1x3x5xf16>, %w: tensor<3x4x3xf16>) -> tensor<1x4x10xf16> {
  %0 = "ipu.conv_transpose"(%x, %w) {strides = array<i64: 2>, padding = array<i64: 1>, output_padding = array<i64: 1>, dilations = array<i64: 1>, groups = 1 : i64} : (tensor<1x3x5xf16>, tensor<3x4x3xf16>) -> tensor<1x4x10xf16>
  return %0 : tensor<1x4x10xf16>
}

// Unbatched (C, H, W) input, ceil mode.
// CHECK-LABEL: func.func @max_pool
// CHECK:         "ipu.max_pool"(%arg0) {ceil_mode = true, dilations = array<i64: 1, 1>, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1>, strides = array<i64: 2, 2>} : (tensor<3x8x8xf32>) -> tensor<3x5x5xf32>
func.func @max_pool(%x: tensor<3x8x8xf32>) -> tensor<3x5x5xf32> {
  %0 = "ipu.max_pool"(%x) {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1>, dilations = array<i64: 1, 1>, ceil_mode = true} : (tensor<3x8x8xf32>) -> tensor<3x5x5xf32>
  return %0 : tensor<3x5x5xf32>
}

// CHECK-LABEL: func.func @max_pool_with_indices
// CHECK:         "ipu.max_pool_with_indices"(%arg0) {ceil_mode = false, dilations = array<i64: 2>, kernel = array<i64: 2>, padding = array<i64: 1>, strides = array<i64: 2>} : (tensor<1x3x8xf16>) -> (tensor<1x3x4xf16>, tensor<1x3x4xi64>)
func.func @max_pool_with_indices(%x: tensor<1x3x8xf16>) -> (tensor<1x3x4xf16>, tensor<1x3x4xi64>) {
  %0, %1 = "ipu.max_pool_with_indices"(%x) {kernel = array<i64: 2>, strides = array<i64: 2>, padding = array<i64: 1>, dilations = array<i64: 2>, ceil_mode = false} : (tensor<1x3x8xf16>) -> (tensor<1x3x4xf16>, tensor<1x3x4xi64>)
  return %0, %1 : tensor<1x3x4xf16>, tensor<1x3x4xi64>
}

// 3-d pooling with a divisor override.
// CHECK-LABEL: func.func @avg_pool
// CHECK:         "ipu.avg_pool"(%arg0) {ceil_mode = false, count_include_pad = false, divisor = 3 : i64, kernel = array<i64: 2, 2, 2>, padding = array<i64: 0, 0, 0>, strides = array<i64: 2, 2, 2>} : (tensor<1x3x4x6x6xf32>) -> tensor<1x3x2x3x3xf32>
func.func @avg_pool(%x: tensor<1x3x4x6x6xf32>) -> tensor<1x3x2x3x3xf32> {
  %0 = "ipu.avg_pool"(%x) {kernel = array<i64: 2, 2, 2>, strides = array<i64: 2, 2, 2>, padding = array<i64: 0, 0, 0>, ceil_mode = false, count_include_pad = false, divisor = 3 : i64} : (tensor<1x3x4x6x6xf32>) -> tensor<1x3x2x3x3xf32>
  return %0 : tensor<1x3x2x3x3xf32>
}

// Adaptive pooling of the trailing 3 and 2 dims.
// CHECK-LABEL: func.func @adaptive
// CHECK:         "ipu.adaptive_max_pool"(%arg0) {output_size = array<i64: 3, 3, 3>} : (tensor<1x2x8x8x8xf32>) -> tensor<1x2x3x3x3xf32>
// CHECK-NEXT:    "ipu.adaptive_avg_pool"(%arg0) {output_size = array<i64: 3, 5>} : (tensor<1x2x8x8x8xf32>) -> tensor<1x2x8x3x5xf32>
func.func @adaptive(%x: tensor<1x2x8x8x8xf32>) -> (tensor<1x2x3x3x3xf32>, tensor<1x2x8x3x5xf32>) {
  %0 = "ipu.adaptive_max_pool"(%x) {output_size = array<i64: 3, 3, 3>} : (tensor<1x2x8x8x8xf32>) -> tensor<1x2x3x3x3xf32>
  %1 = "ipu.adaptive_avg_pool"(%x) {output_size = array<i64: 3, 5>} : (tensor<1x2x8x8x8xf32>) -> tensor<1x2x8x3x5xf32>
  return %0, %1 : tensor<1x2x3x3x3xf32>, tensor<1x2x8x3x5xf32>
}

// Negative padding crops; the value of an integer tensor's padding is still a float.
// CHECK-LABEL: func.func @pad
// CHECK:         "ipu.pad"(%arg0) {high = array<i64: 0, 2>, low = array<i64: 0, -1>, mode = "constant", value = -1.500000e+00 : f64} : (tensor<2x3xi32>) -> tensor<2x4xi32>
func.func @pad(%x: tensor<2x3xi32>) -> tensor<2x4xi32> {
  %0 = "ipu.pad"(%x) {low = array<i64: 0, -1>, high = array<i64: 0, 2>, value = -1.5 : f64, mode = "constant"} : (tensor<2x3xi32>) -> tensor<2x4xi32>
  return %0 : tensor<2x4xi32>
}

// A scale of 0 means the output size was given.
// CHECK-LABEL: func.func @upsample_nearest
// CHECK:         "ipu.upsample_nearest"(%arg0) {scales = array<f64: 1.500000e+00, 0.000000e+00>} : (tensor<1x3x4x4xf32>) -> tensor<1x3x6x3xf32>
func.func @upsample_nearest(%x: tensor<1x3x4x4xf32>) -> tensor<1x3x6x3xf32> {
  %0 = "ipu.upsample_nearest"(%x) {scales = array<f64: 1.5, 0.0>} : (tensor<1x3x4x4xf32>) -> tensor<1x3x6x3xf32>
  return %0 : tensor<1x3x6x3xf32>
}
