// RUN: ipu-opt %s | ipu-opt | FileCheck %s

// Every op of dialects/convolution_backward.py parses, verifies and prints back in
// generic form.

// The weight gradient of a grouped, strided, dilated conv with asymmetric padding:
// the gradient is that conv's output (2x6x4x9, as @conv in convolution.mlir).
// CHECK-LABEL: func.func @conv_weight_grad
// CHECK:         "ipu.conv_weight_grad"(%arg0, %arg1) {dilations = array<i64: 1, 2>, groups = 2 : i64, padding_high = array<i64: 0, 1>, padding_low = array<i64: 1, 2>, strides = array<i64: 2, 1>} : (tensor<2x4x9x8xf32>, tensor<2x6x4x9xf32>) -> tensor<6x2x3x2xf32>
func.func @conv_weight_grad(%x: tensor<2x4x9x8xf32>, %dy: tensor<2x6x4x9xf32>) -> tensor<6x2x3x2xf32> {
  %0 = "ipu.conv_weight_grad"(%x, %dy) {strides = array<i64: 2, 1>, padding_low = array<i64: 1, 2>, padding_high = array<i64: 0, 1>, dilations = array<i64: 1, 2>, groups = 2 : i64} : (tensor<2x4x9x8xf32>, tensor<2x6x4x9xf32>) -> tensor<6x2x3x2xf32>
  return %0 : tensor<6x2x3x2xf32>
}

// Ceil mode: 8 rows pool to 5 with a 3-window at stride 2 and padding 1.
// CHECK-LABEL: func.func @max_pool_grad
// CHECK:         "ipu.max_pool_grad"(%arg0, %arg1) {ceil_mode = true, dilations = array<i64: 1, 2>, kernel = array<i64: 3, 2>, padding = array<i64: 1, 0>, strides = array<i64: 2, 2>} : (tensor<1x3x5x3xf16>, tensor<1x3x5x3xi64>) -> tensor<1x3x8x7xf16>
func.func @max_pool_grad(%dy: tensor<1x3x5x3xf16>, %i: tensor<1x3x5x3xi64>) -> tensor<1x3x8x7xf16> {
  %0 = "ipu.max_pool_grad"(%dy, %i) {kernel = array<i64: 3, 2>, strides = array<i64: 2, 2>, padding = array<i64: 1, 0>, dilations = array<i64: 1, 2>, ceil_mode = true} : (tensor<1x3x5x3xf16>, tensor<1x3x5x3xi64>) -> tensor<1x3x8x7xf16>
  return %0 : tensor<1x3x8x7xf16>
}

// CHECK-LABEL: func.func @avg_pool_grad
// CHECK:         "ipu.avg_pool_grad"(%arg0) {ceil_mode = false, count_include_pad = false, divisor = 3 : i64, kernel = array<i64: 3>, padding = array<i64: 1>, strides = array<i64: 1>} : (tensor<3x8xf32>) -> tensor<3x8xf32>
func.func @avg_pool_grad(%dy: tensor<3x8xf32>) -> tensor<3x8xf32> {
  %0 = "ipu.avg_pool_grad"(%dy) {kernel = array<i64: 3>, strides = array<i64: 1>, padding = array<i64: 1>, ceil_mode = false, count_include_pad = false, divisor = 3 : i64} : (tensor<3x8xf32>) -> tensor<3x8xf32>
  return %0 : tensor<3x8xf32>
}

// CHECK-LABEL: func.func @adaptive_avg_pool_grad
// CHECK:         "ipu.adaptive_avg_pool_grad"(%arg0) {output_size = array<i64: 2, 3, 2>} : (tensor<1x2x2x3x2xf32>) -> tensor<1x2x5x6x5xf32>
func.func @adaptive_avg_pool_grad(%dy: tensor<1x2x2x3x2xf32>) -> tensor<1x2x5x6x5xf32> {
  %0 = "ipu.adaptive_avg_pool_grad"(%dy) {output_size = array<i64: 2, 3, 2>} : (tensor<1x2x2x3x2xf32>) -> tensor<1x2x5x6x5xf32>
  return %0 : tensor<1x2x5x6x5xf32>
}

// CHECK-LABEL: func.func @adaptive_max_pool_with_indices
// CHECK:         "ipu.adaptive_max_pool_with_indices"(%arg0) {output_size = array<i64: 3>} : (tensor<1x2x8xf32>) -> (tensor<1x2x3xf32>, tensor<1x2x3xi64>)
func.func @adaptive_max_pool_with_indices(%x: tensor<1x2x8xf32>) -> (tensor<1x2x3xf32>, tensor<1x2x3xi64>) {
  %0:2 = "ipu.adaptive_max_pool_with_indices"(%x) {output_size = array<i64: 3>} : (tensor<1x2x8xf32>) -> (tensor<1x2x3xf32>, tensor<1x2x3xi64>)
  return %0#0, %0#1 : tensor<1x2x3xf32>, tensor<1x2x3xi64>
}
