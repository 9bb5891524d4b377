// RUN: ipu-opt %s --ipu-convert-torch-to-ipu --canonicalize --split-input-file | FileCheck %s

// conv2d with bias: ipu.conv, then the bias reshaped to (C, 1, 1) and added.
// CHECK-LABEL: func.func @convolution$bias
// CHECK-DAG:     %[[X:.*]] = torch_c.to_builtin_tensor %arg0
// CHECK-DAG:     %[[W:.*]] = torch_c.to_builtin_tensor %arg1
// CHECK:         %[[C:.*]] = "ipu.conv"(%[[X]], %[[W]]) {dilations = array<i64: 1, 1>, groups = 1 : i64, padding_high = array<i64: 1, 1>, padding_low = array<i64: 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x4x4xf32>
// CHECK:         %[[B:.*]] = torch_c.to_builtin_tensor %arg2
// CHECK-NEXT:    %[[R:.*]] = "ipu.reshape"(%[[B]]) : (tensor<4xf32>) -> tensor<4x1x1xf32>
// CHECK-NEXT:    %[[Y:.*]] = "ipu.add"(%[[C]], %[[R]]) : (tensor<1x4x4x4xf32>, tensor<4x1x1xf32>) -> tensor<1x4x4x4xf32>
// CHECK-NEXT:    torch_c.from_builtin_tensor %[[Y]]
func.func @convolution$bias(%x: !torch.vtensor<[1,3,8,8],f32>, %w: !torch.vtensor<[4,3,3,3],f32>, %b: !torch.vtensor<[4],f32>) -> !torch.vtensor<[1,4,4,4],f32> {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %false = torch.constant.bool false
  %stride = torch.prim.ListConstruct %int2, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
  %padding = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %dilation = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %output_padding = torch.prim.ListConstruct %int0, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.aten.convolution %x, %w, %b, %stride, %padding, %dilation, %false, %output_padding, %int1 : !torch.vtensor<[1,3,8,8],f32>, !torch.vtensor<[4,3,3,3],f32>, !torch.vtensor<[4],f32>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int -> !torch.vtensor<[1,4,4,4],f32>
  return %0 : !torch.vtensor<[1,4,4,4],f32>
}

// -----

// padding='same' with an even kernel: the zero pad torch emits folds into the conv's
// high padding; grouped and dilated, no bias.
// CHECK-LABEL: func.func @convolution$same
// CHECK-NOT:     ipu.pad
// CHECK-DAG:     %[[X:.*]] = torch_c.to_builtin_tensor %arg0
// CHECK-DAG:     %[[W:.*]] = torch_c.to_builtin_tensor %arg1
// CHECK:         "ipu.conv"(%[[X]], %[[W]]) {dilations = array<i64: 2, 1>, groups = 2 : i64, padding_high = array<i64: 2, 1>, padding_low = array<i64: 2, 0>, strides = array<i64: 1, 1>} : (tensor<1x4x8x8xf32>, tensor<6x2x3x2xf32>) -> tensor<1x6x8x8xf32>
// CHECK-NOT:     ipu.pad
func.func @convolution$same(%x: !torch.vtensor<[1,4,8,8],f32>, %w: !torch.vtensor<[6,2,3,2],f32>) -> !torch.vtensor<[1,6,8,8],f32> {
  %none = torch.constant.none
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %false = torch.constant.bool false
  %pad = torch.prim.ListConstruct %int0, %int1, %int0, %int0 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %padded = torch.aten.constant_pad_nd %x, %pad, %int0 : !torch.vtensor<[1,4,8,8],f32>, !torch.list<int>, !torch.int -> !torch.vtensor<[1,4,8,9],f32>
  %stride = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %padding = torch.prim.ListConstruct %int2, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
  %dilation = torch.prim.ListConstruct %int2, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %output_padding = torch.prim.ListConstruct %int0, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.aten.convolution %padded, %w, %none, %stride, %padding, %dilation, %false, %output_padding, %int2 : !torch.vtensor<[1,4,8,9],f32>, !torch.vtensor<[6,2,3,2],f32>, !torch.none, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int -> !torch.vtensor<[1,6,8,8],f32>
  return %0 : !torch.vtensor<[1,6,8,8],f32>
}

// -----

// CHECK-LABEL: func.func @convolution$transposed
// CHECK:         "ipu.conv_transpose"(%{{.*}}, %{{.*}}) {dilations = array<i64: 1>, groups = 1 : i64, output_padding = array<i64: 1>, padding = array<i64: 1>, strides = array<i64: 2>} : (tensor<1x3x5xf32>, tensor<3x4x3xf32>) -> tensor<1x4x10xf32>
// CHECK-NOT:     ipu.add
func.func @convolution$transposed(%x: !torch.vtensor<[1,3,5],f32>, %w: !torch.vtensor<[3,4,3],f32>) -> !torch.vtensor<[1,4,10],f32> {
  %none = torch.constant.none
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %true = torch.constant.bool true
  %stride = torch.prim.ListConstruct %int2 : (!torch.int) -> !torch.list<int>
  %padding = torch.prim.ListConstruct %int1 : (!torch.int) -> !torch.list<int>
  %dilation = torch.prim.ListConstruct %int1 : (!torch.int) -> !torch.list<int>
  %output_padding = torch.prim.ListConstruct %int1 : (!torch.int) -> !torch.list<int>
  %0 = torch.aten.convolution %x, %w, %none, %stride, %padding, %dilation, %true, %output_padding, %int1 : !torch.vtensor<[1,3,5],f32>, !torch.vtensor<[3,4,3],f32>, !torch.none, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int -> !torch.vtensor<[1,4,10],f32>
  return %0 : !torch.vtensor<[1,4,10],f32>
}

// -----

// CHECK-LABEL: func.func @max_pool2d$ceil
// CHECK:         "ipu.max_pool"(%{{.*}}) {ceil_mode = true, dilations = array<i64: 1, 1>, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x8x8xf32>) -> tensor<1x3x5x5xf32>
func.func @max_pool2d$ceil(%x: !torch.vtensor<[1,3,8,8],f32>) -> !torch.vtensor<[1,3,5,5],f32> {
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int3 = torch.constant.int 3
  %true = torch.constant.bool true
  %kernel = torch.prim.ListConstruct %int3, %int3 : (!torch.int, !torch.int) -> !torch.list<int>
  %stride = torch.prim.ListConstruct %int2, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
  %padding = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %dilation = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.aten.max_pool2d %x, %kernel, %stride, %padding, %dilation, %true : !torch.vtensor<[1,3,8,8],f32>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool -> !torch.vtensor<[1,3,5,5],f32>
  return %0 : !torch.vtensor<[1,3,5,5],f32>
}

// -----

// An empty stride list means stride = kernel.
// CHECK-LABEL: func.func @max_pool3d$default_stride
// CHECK:         "ipu.max_pool"(%{{.*}}) {ceil_mode = false, dilations = array<i64: 1, 1, 1>, kernel = array<i64: 2, 2, 2>, padding = array<i64: 0, 0, 0>, strides = array<i64: 2, 2, 2>} : (tensor<2x4x4x4xf32>) -> tensor<2x2x2x2xf32>
func.func @max_pool3d$default_stride(%x: !torch.vtensor<[2,4,4,4],f32>) -> !torch.vtensor<[2,2,2,2],f32> {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %false = torch.constant.bool false
  %kernel = torch.prim.ListConstruct %int2, %int2, %int2 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %stride = torch.prim.ListConstruct  : () -> !torch.list<int>
  %padding = torch.prim.ListConstruct %int0, %int0, %int0 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %dilation = torch.prim.ListConstruct %int1, %int1, %int1 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.aten.max_pool3d %x, %kernel, %stride, %padding, %dilation, %false : !torch.vtensor<[2,4,4,4],f32>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool -> !torch.vtensor<[2,2,2,2],f32>
  return %0 : !torch.vtensor<[2,2,2,2],f32>
}

// -----

// max_pool2d_with_indices of an unbatched (C, H, W) input.
// CHECK-LABEL: func.func @max_pool2d_with_indices
// CHECK:         %[[P:.*]]:2 = "ipu.max_pool_with_indices"(%{{.*}}) {ceil_mode = false, dilations = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0>, strides = array<i64: 2, 2>} : (tensor<3x8x8xf32>) -> (tensor<3x4x4xf32>, tensor<3x4x4xi64>)
// CHECK-DAG:     torch_c.from_builtin_tensor %[[P]]#0
// CHECK-DAG:     torch_c.from_builtin_tensor %[[P]]#1
func.func @max_pool2d_with_indices(%x: !torch.vtensor<[3,8,8],f32>) -> (!torch.vtensor<[3,4,4],f32>, !torch.vtensor<[3,4,4],si64>) {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %false = torch.constant.bool false
  %kernel = torch.prim.ListConstruct %int2, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
  %padding = torch.prim.ListConstruct %int0, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
  %dilation = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %0, %1 = torch.aten.max_pool2d_with_indices %x, %kernel, %kernel, %padding, %dilation, %false : !torch.vtensor<[3,8,8],f32>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool -> !torch.vtensor<[3,4,4],f32>, !torch.vtensor<[3,4,4],si64>
  return %0, %1 : !torch.vtensor<[3,4,4],f32>, !torch.vtensor<[3,4,4],si64>
}

// -----

// CHECK-LABEL: func.func @avg_pool2d$divisor
// CHECK:         "ipu.avg_pool"(%{{.*}}) {ceil_mode = false, count_include_pad = false, divisor = 5 : i64, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x8x8xf32>) -> tensor<1x3x4x4xf32>
func.func @avg_pool2d$divisor(%x: !torch.vtensor<[1,3,8,8],f32>) -> !torch.vtensor<[1,3,4,4],f32> {
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int3 = torch.constant.int 3
  %int5 = torch.constant.int 5
  %false = torch.constant.bool false
  %kernel = torch.prim.ListConstruct %int3, %int3 : (!torch.int, !torch.int) -> !torch.list<int>
  %stride = torch.prim.ListConstruct %int2, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
  %padding = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.aten.avg_pool2d %x, %kernel, %stride, %padding, %false, %false, %int5 : !torch.vtensor<[1,3,8,8],f32>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.bool, !torch.int -> !torch.vtensor<[1,3,4,4],f32>
  return %0 : !torch.vtensor<[1,3,4,4],f32>
}

// -----

// avg_pool1d has no divisor_override: divisor 0 (the window size).
// CHECK-LABEL: func.func @avg_pool1d
// CHECK:         "ipu.avg_pool"(%{{.*}}) {ceil_mode = false, count_include_pad = true, divisor = 0 : i64, kernel = array<i64: 2>, padding = array<i64: 0>, strides = array<i64: 2>} : (tensor<1x3x8xf32>) -> tensor<1x3x4xf32>
func.func @avg_pool1d(%x: !torch.vtensor<[1,3,8],f32>) -> !torch.vtensor<[1,3,4],f32> {
  %int0 = torch.constant.int 0
  %int2 = torch.constant.int 2
  %false = torch.constant.bool false
  %true = torch.constant.bool true
  %kernel = torch.prim.ListConstruct %int2 : (!torch.int) -> !torch.list<int>
  %stride = torch.prim.ListConstruct %int2 : (!torch.int) -> !torch.list<int>
  %padding = torch.prim.ListConstruct %int0 : (!torch.int) -> !torch.list<int>
  %0 = torch.aten.avg_pool1d %x, %kernel, %stride, %padding, %false, %true : !torch.vtensor<[1,3,8],f32>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.bool -> !torch.vtensor<[1,3,4],f32>
  return %0 : !torch.vtensor<[1,3,4],f32>
}

// -----

// CHECK-LABEL: func.func @adaptive_avg_pool3d
// CHECK:         "ipu.adaptive_avg_pool"(%{{.*}}) {output_size = array<i64: 2, 3, 2>} : (tensor<1x2x4x5x6xf32>) -> tensor<1x2x2x3x2xf32>
func.func @adaptive_avg_pool3d(%x: !torch.vtensor<[1,2,4,5,6],f32>) -> !torch.vtensor<[1,2,2,3,2],f32> {
  %int2 = torch.constant.int 2
  %int3 = torch.constant.int 3
  %size = torch.prim.ListConstruct %int2, %int3, %int2 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.aten._adaptive_avg_pool3d %x, %size : !torch.vtensor<[1,2,4,5,6],f32>, !torch.list<int> -> !torch.vtensor<[1,2,2,3,2],f32>
  return %0 : !torch.vtensor<[1,2,2,3,2],f32>
}

// -----

// The unused indices result leaves nothing behind.
// CHECK-LABEL: func.func @adaptive_max_pool2d
// CHECK:         %[[X:.*]] = torch_c.to_builtin_tensor %arg0
// CHECK-NEXT:    %[[Y:.*]] = "ipu.adaptive_max_pool"(%[[X]]) {output_size = array<i64: 3, 5>} : (tensor<1x2x8x8xf32>) -> tensor<1x2x3x5xf32>
// CHECK-NEXT:    %[[R:.*]] = torch_c.from_builtin_tensor %[[Y]]
// CHECK-NEXT:    return %[[R]]
func.func @adaptive_max_pool2d(%x: !torch.vtensor<[1,2,8,8],f32>) -> !torch.vtensor<[1,2,3,5],f32> {
  %int3 = torch.constant.int 3
  %int5 = torch.constant.int 5
  %size = torch.prim.ListConstruct %int3, %int5 : (!torch.int, !torch.int) -> !torch.list<int>
  %0, %1 = torch.aten.adaptive_max_pool2d %x, %size : !torch.vtensor<[1,2,8,8],f32>, !torch.list<int> -> !torch.vtensor<[1,2,3,5],f32>, !torch.vtensor<[1,2,3,5],si64>
  return %0 : !torch.vtensor<[1,2,3,5],f32>
}

// -----

// pad lists (low, high) pairs from the last dim; negative amounts crop.
// CHECK-LABEL: func.func @constant_pad_nd
// CHECK:         "ipu.pad"(%{{.*}}) {high = array<i64: 0, 1, 2>, low = array<i64: 0, 0, -1>, mode = "constant", value = 7.000000e+00 : f64} : (tensor<2x3x4xi32>) -> tensor<2x4x5xi32>
func.func @constant_pad_nd(%x: !torch.vtensor<[2,3,4],si32>) -> !torch.vtensor<[2,4,5],si32> {
  %int7 = torch.constant.int 7
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int-1 = torch.constant.int -1
  %int0 = torch.constant.int 0
  %pad = torch.prim.ListConstruct %int-1, %int2, %int0, %int1 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.aten.constant_pad_nd %x, %pad, %int7 : !torch.vtensor<[2,3,4],si32>, !torch.list<int>, !torch.int -> !torch.vtensor<[2,4,5],si32>
  return %0 : !torch.vtensor<[2,4,5],si32>
}

// -----

// CHECK-LABEL: func.func @interpolate$scale
// CHECK:         "ipu.upsample_nearest"(%{{.*}}) {scales = array<f64: 1.500000e+00, 2.000000e+00>} : (tensor<1x3x4x4xf32>) -> tensor<1x3x6x8xf32>
func.func @interpolate$scale(%x: !torch.vtensor<[1,3,4,4],f32>) -> !torch.vtensor<[1,3,6,8],f32> {
  %false = torch.constant.bool false
  %str = torch.constant.str "nearest"
  %none = torch.constant.none
  %float1.5 = torch.constant.float 1.500000e+00
  %float2.0 = torch.constant.float 2.000000e+00
  %scale = torch.prim.ListConstruct %float1.5, %float2.0 : (!torch.float, !torch.float) -> !torch.list<float>
  %0 = torch.aten.__interpolate.size_list_scale_list %x, %none, %scale, %str, %none, %none, %false : !torch.vtensor<[1,3,4,4],f32>, !torch.none, !torch.list<float>, !torch.str, !torch.none, !torch.none, !torch.bool -> !torch.vtensor<[1,3,6,8],f32>
  return %0 : !torch.vtensor<[1,3,6,8],f32>
}

// -----

// A size instead of scales: scales 0 (out / in).
// CHECK-LABEL: func.func @interpolate$size
// CHECK:         "ipu.upsample_nearest"(%{{.*}}) {scales = array<f64: 0.000000e+00, 0.000000e+00>} : (tensor<1x3x4x4xf32>) -> tensor<1x3x7x3xf32>
func.func @interpolate$size(%x: !torch.vtensor<[1,3,4,4],f32>) -> !torch.vtensor<[1,3,7,3],f32> {
  %false = torch.constant.bool false
  %str = torch.constant.str "nearest"
  %none = torch.constant.none
  %int7 = torch.constant.int 7
  %int3 = torch.constant.int 3
  %size = torch.prim.ListConstruct %int7, %int3 : (!torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.aten.__interpolate.size_list_scale_list %x, %size, %none, %str, %none, %none, %false : !torch.vtensor<[1,3,4,4],f32>, !torch.list<int>, !torch.none, !torch.str, !torch.none, !torch.none, !torch.bool -> !torch.vtensor<[1,3,7,3],f32>
  return %0 : !torch.vtensor<[1,3,7,3],f32>
}
