// RUN: ipu-opt %s --ipu-import-annotations | FileCheck %s

// poptorch.MultiConv's group and options ride in location metadata; the pass puts
// them on the ipu conv ops, where the machine model's cost rule reads them
// (runtime/machine/cost_multiconv.py).

// CHECK-LABEL: func.func @multiconv
// CHECK:         "ipu.conv"(%arg0, %arg1) {dilations = array<i64: 1, 1>, groups = 1 : i64, ipu.multiconv = 3 : i64, ipu.multiconv_options = "{\22plan_type\22: \22serial\22}", padding_high = array<i64: 0, 0>, padding_low = array<i64: 0, 0>, strides = array<i64: 1, 1>}
func.func @multiconv(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> {
  %0 = "ipu.conv"(%x, %w) {strides = array<i64: 1, 1>, padding_low = array<i64: 0, 0>, padding_high = array<i64: 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32> loc(#group)
  return %0 : tensor<1x4x6x6xf32>
}
#group = loc(fused<{ipu.multiconv = 3 : i64, ipu.multiconv_options = "{\22plan_type\22: \22serial\22}"}>["model.py":7:8])
