// RUN: ipu-opt %s --ipu-convert-torch-to-ipu --canonicalize --cse --split-input-file | FileCheck %s

// The gradients of convolutions and pooling (passes/conversion/convolution_backward.py).

// All three gradients of a strided conv2d: the input's is the transposed convolution
// with output_padding 1 (8 = (4 - 1) * 2 - 2 + 3 + 1), the bias's a sum over N, H, W.
// CHECK-LABEL: func.func @convolution_backward$strided
// CHECK-DAG:     %[[DY:.*]] = torch_c.to_builtin_tensor %arg0
// CHECK-DAG:     %[[X:.*]] = torch_c.to_builtin_tensor %arg1
// CHECK-DAG:     %[[W:.*]] = torch_c.to_builtin_tensor %arg2
// CHECK:         %[[DX:.*]] = "ipu.conv_transpose"(%[[DY]], %[[W]]) {dilations = array<i64: 1, 1>, groups = 1 : i64, output_padding = array<i64: 1, 1>, padding = array<i64: 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x4x4x4xf32>, tensor<4x3x3x3xf32>) -> tensor<2x3x8x8xf32>
// CHECK-NEXT:    %[[DW:.*]] = "ipu.conv_weight_grad"(%[[X]], %[[DY]]) {dilations = array<i64: 1, 1>, groups = 1 : i64, padding_high = array<i64: 1, 1>, padding_low = array<i64: 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x3x8x8xf32>, tensor<2x4x4x4xf32>) -> tensor<4x3x3x3xf32>
// CHECK-NEXT:    %[[DB:.*]] = "ipu.reduce"(%[[DY]]) {dims = array<i64: 0, 2, 3>, keepdim = false, kind = "sum"} : (tensor<2x4x4x4xf32>) -> tensor<4xf32>
// CHECK-DAG:     torch_c.from_builtin_tensor %[[DX]]
// CHECK-DAG:     torch_c.from_builtin_tensor %[[DW]]
// CHECK-DAG:     torch_c.from_builtin_tensor %[[DB]]
func.func @convolution_backward$strided(%dy: !torch.vtensor<[2,4,4,4],f32>, %x: !torch.vtensor<[2,3,8,8],f32>, %w: !torch.vtensor<[4,3,3,3],f32>) -> (!torch.vtensor<[2,3,8,8],f32>, !torch.vtensor<[4,3,3,3],f32>, !torch.vtensor<[4],f32>) {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int4 = torch.constant.int 4
  %false = torch.constant.bool false
  %true = torch.constant.bool true
  %bias_sizes = torch.prim.ListConstruct %int4 : (!torch.int) -> !torch.list<int>
  %stride = torch.prim.ListConstruct %int2, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
  %padding = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %dilation = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %output_padding = torch.prim.ListConstruct %int0, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
  %mask = torch.prim.ListConstruct %true, %true, %true : (!torch.bool, !torch.bool, !torch.bool) -> !torch.list<bool>
  %0:3 = torch.aten.convolution_backward %dy, %x, %w, %bias_sizes, %stride, %padding, %dilation, %false, %output_padding, %int1, %mask : !torch.vtensor<[2,4,4,4],f32>, !torch.vtensor<[2,3,8,8],f32>, !torch.vtensor<[4,3,3,3],f32>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int, !torch.list<bool> -> !torch.vtensor<[2,3,8,8],f32>, !torch.vtensor<[4,3,3,3],f32>, !torch.vtensor<[4],f32>
  return %0#0, %0#1, %0#2 : !torch.vtensor<[2,3,8,8],f32>, !torch.vtensor<[4,3,3,3],f32>, !torch.vtensor<[4],f32>
}

// -----

// output_mask leaves out the input's gradient (a first layer): nothing computes it.
// Grouped and dilated conv1d.
// CHECK-LABEL: func.func @convolution_backward$input_unused
// CHECK-NOT:     ipu.conv_transpose
// CHECK:         "ipu.conv_weight_grad"(%{{.*}}, %{{.*}}) {dilations = array<i64: 2>, groups = 2 : i64, padding_high = array<i64: 0>, padding_low = array<i64: 0>, strides = array<i64: 1>} : (tensor<2x4x11xf32>, tensor<2x6x7xf32>) -> tensor<6x2x3xf32>
// CHECK-NEXT:    "ipu.reduce"(%{{.*}}) {dims = array<i64: 0, 2>, keepdim = false, kind = "sum"} : (tensor<2x6x7xf32>) -> tensor<6xf32>
// CHECK-NOT:     ipu.conv_transpose
func.func @convolution_backward$input_unused(%dy: !torch.vtensor<[2,6,7],f32>, %x: !torch.vtensor<[2,4,11],f32>, %w: !torch.vtensor<[6,2,3],f32>) -> (!torch.vtensor<[6,2,3],f32>, !torch.vtensor<[6],f32>) {
  %int0 = torch.constant.int 0
  %int2 = torch.constant.int 2
  %int6 = torch.constant.int 6
  %false = torch.constant.bool false
  %true = torch.constant.bool true
  %bias_sizes = torch.prim.ListConstruct %int6 : (!torch.int) -> !torch.list<int>
  %one = torch.constant.int 1
  %stride = torch.prim.ListConstruct %one : (!torch.int) -> !torch.list<int>
  %padding = torch.prim.ListConstruct %int0 : (!torch.int) -> !torch.list<int>
  %dilation = torch.prim.ListConstruct %int2 : (!torch.int) -> !torch.list<int>
  %output_padding = torch.prim.ListConstruct %int0 : (!torch.int) -> !torch.list<int>
  %mask = torch.prim.ListConstruct %false, %true, %true : (!torch.bool, !torch.bool, !torch.bool) -> !torch.list<bool>
  %0:3 = torch.aten.convolution_backward %dy, %x, %w, %bias_sizes, %stride, %padding, %dilation, %false, %output_padding, %int2, %mask : !torch.vtensor<[2,6,7],f32>, !torch.vtensor<[2,4,11],f32>, !torch.vtensor<[6,2,3],f32>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int, !torch.list<bool> -> !torch.none, !torch.vtensor<[6,2,3],f32>, !torch.vtensor<[6],f32>
  return %0#1, %0#2 : !torch.vtensor<[6,2,3],f32>, !torch.vtensor<[6],f32>
}

// -----

// A transposed convolution's input gradient is the convolution (its output_padding 1
// comes off the high padding); its weight gradient swaps input and gradient. No bias.
// CHECK-LABEL: func.func @convolution_backward$transposed
// CHECK-DAG:     %[[DY:.*]] = torch_c.to_builtin_tensor %arg0
// CHECK-DAG:     %[[X:.*]] = torch_c.to_builtin_tensor %arg1
// CHECK-DAG:     %[[W:.*]] = torch_c.to_builtin_tensor %arg2
// CHECK:         "ipu.conv"(%[[DY]], %[[W]]) {dilations = array<i64: 1>, groups = 1 : i64, padding_high = array<i64: 0>, padding_low = array<i64: 1>, strides = array<i64: 2>} : (tensor<1x4x10xf32>, tensor<3x4x3xf32>) -> tensor<1x3x5xf32>
// CHECK-NEXT:    "ipu.conv_weight_grad"(%[[DY]], %[[X]]) {dilations = array<i64: 1>, groups = 1 : i64, padding_high = array<i64: 0>, padding_low = array<i64: 1>, strides = array<i64: 2>} : (tensor<1x4x10xf32>, tensor<1x3x5xf32>) -> tensor<3x4x3xf32>
// CHECK-NOT:     ipu.reduce
func.func @convolution_backward$transposed(%dy: !torch.vtensor<[1,4,10],f32>, %x: !torch.vtensor<[1,3,5],f32>, %w: !torch.vtensor<[3,4,3],f32>) -> (!torch.vtensor<[1,3,5],f32>, !torch.vtensor<[3,4,3],f32>) {
  %none = torch.constant.none
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %true = torch.constant.bool true
  %false = torch.constant.bool false
  %stride = torch.prim.ListConstruct %int2 : (!torch.int) -> !torch.list<int>
  %padding = torch.prim.ListConstruct %int1 : (!torch.int) -> !torch.list<int>
  %dilation = torch.prim.ListConstruct %int1 : (!torch.int) -> !torch.list<int>
  %output_padding = torch.prim.ListConstruct %int1 : (!torch.int) -> !torch.list<int>
  %mask = torch.prim.ListConstruct %true, %true, %false : (!torch.bool, !torch.bool, !torch.bool) -> !torch.list<bool>
  %0:3 = torch.aten.convolution_backward %dy, %x, %w, %none, %stride, %padding, %dilation, %true, %output_padding, %int1, %mask : !torch.vtensor<[1,4,10],f32>, !torch.vtensor<[1,3,5],f32>, !torch.vtensor<[3,4,3],f32>, !torch.none, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int, !torch.list<bool> -> !torch.vtensor<[1,3,5],f32>, !torch.vtensor<[3,4,3],f32>, !torch.none
  return %0#0, %0#1 : !torch.vtensor<[1,3,5],f32>, !torch.vtensor<[3,4,3],f32>
}

// -----

// An output_padding larger than the padding (allowed when the dilation exceeds the
// stride): what the high padding cannot absorb is cropped off the gradient.
// CHECK-LABEL: func.func @convolution_backward$transposed_crop
// CHECK:         %[[DY:.*]] = "ipu.pad"(%{{.*}}) {high = array<i64: 0, 0, -2>, low = array<i64: 0, 0, 0>, mode = "constant", value = 0.000000e+00 : f64} : (tensor<1x2x13xf32>) -> tensor<1x2x11xf32>
// CHECK-NEXT:    "ipu.conv"(%[[DY]], %{{.*}}) {dilations = array<i64: 3>, groups = 1 : i64, padding_high = array<i64: 0>, padding_low = array<i64: 0>, strides = array<i64: 1>} : (tensor<1x2x11xf32>, tensor<3x2x3xf32>) -> tensor<1x3x5xf32>
// CHECK-NEXT:    "ipu.conv_weight_grad"(%[[DY]], %{{.*}}) {dilations = array<i64: 3>, groups = 1 : i64, padding_high = array<i64: 0>, padding_low = array<i64: 0>, strides = array<i64: 1>} : (tensor<1x2x11xf32>, tensor<1x3x5xf32>) -> tensor<3x2x3xf32>
// CHECK-NEXT:    "ipu.reduce"(%{{.*}}) {dims = array<i64: 0, 2>, keepdim = false, kind = "sum"} : (tensor<1x2x13xf32>) -> tensor<2xf32>
func.func @convolution_backward$transposed_crop(%dy: !torch.vtensor<[1,2,13],f32>, %x: !torch.vtensor<[1,3,5],f32>, %w: !torch.vtensor<[3,2,3],f32>) -> (!torch.vtensor<[1,3,5],f32>, !torch.vtensor<[3,2,3],f32>, !torch.vtensor<[2],f32>) {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int3 = torch.constant.int 3
  %true = torch.constant.bool true
  %bias_sizes = torch.prim.ListConstruct %int2 : (!torch.int) -> !torch.list<int>
  %stride = torch.prim.ListConstruct %int1 : (!torch.int) -> !torch.list<int>
  %padding = torch.prim.ListConstruct %int0 : (!torch.int) -> !torch.list<int>
  %dilation = torch.prim.ListConstruct %int3 : (!torch.int) -> !torch.list<int>
  %output_padding = torch.prim.ListConstruct %int2 : (!torch.int) -> !torch.list<int>
  %mask = torch.prim.ListConstruct %true, %true, %true : (!torch.bool, !torch.bool, !torch.bool) -> !torch.list<bool>
  %0:3 = torch.aten.convolution_backward %dy, %x, %w, %bias_sizes, %stride, %padding, %dilation, %true, %output_padding, %int1, %mask : !torch.vtensor<[1,2,13],f32>, !torch.vtensor<[1,3,5],f32>, !torch.vtensor<[3,2,3],f32>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int, !torch.list<bool> -> !torch.vtensor<[1,3,5],f32>, !torch.vtensor<[3,2,3],f32>, !torch.vtensor<[2],f32>
  return %0#0, %0#1, %0#2 : !torch.vtensor<[1,3,5],f32>, !torch.vtensor<[3,2,3],f32>, !torch.vtensor<[2],f32>
}

// -----

// The gradient goes to the forward's indices; the window attributes are the forward's.
// CHECK-LABEL: func.func @max_pool2d_with_indices_backward
// CHECK-DAG:     %[[DY:.*]] = torch_c.to_builtin_tensor %arg0
// CHECK-DAG:     %[[I:.*]] = torch_c.to_builtin_tensor %arg2
// CHECK:         "ipu.max_pool_grad"(%[[DY]], %[[I]]) {ceil_mode = true, dilations = array<i64: 1, 1>, kernel = array<i64: 3, 3>, padding = array<i64: 1, 0>, strides = array<i64: 2, 2>} : (tensor<1x2x5x4xf32>, tensor<1x2x5x4xi64>) -> tensor<1x2x8x8xf32>
func.func @max_pool2d_with_indices_backward(%dy: !torch.vtensor<[1,2,5,4],f32>, %x: !torch.vtensor<[1,2,8,8],f32>, %i: !torch.vtensor<[1,2,5,4],si64>) -> !torch.vtensor<[1,2,8,8],f32> {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int3 = torch.constant.int 3
  %int2 = torch.constant.int 2
  %true = torch.constant.bool true
  %kernel = torch.prim.ListConstruct %int3, %int3 : (!torch.int, !torch.int) -> !torch.list<int>
  %stride = torch.prim.ListConstruct %int2, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
  %padding = torch.prim.ListConstruct %int1, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
  %dilation = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.aten.max_pool2d_with_indices_backward %dy, %x, %kernel, %stride, %padding, %dilation, %true, %i : !torch.vtensor<[1,2,5,4],f32>, !torch.vtensor<[1,2,8,8],f32>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.vtensor<[1,2,5,4],si64> -> !torch.vtensor<[1,2,8,8],f32>
  return %0 : !torch.vtensor<[1,2,8,8],f32>
}

// -----

// Single entries repeat for every dim; an empty stride is the kernel.
// CHECK-LABEL: func.func @max_pool3d_with_indices_backward$default_stride
// CHECK:         "ipu.max_pool_grad"(%{{.*}}, %{{.*}}) {ceil_mode = false, dilations = array<i64: 1, 1, 1>, kernel = array<i64: 2, 2, 2>, padding = array<i64: 0, 0, 0>, strides = array<i64: 2, 2, 2>} : (tensor<1x2x2x2x2xf32>, tensor<1x2x2x2x2xi64>) -> tensor<1x2x4x4x4xf32>
func.func @max_pool3d_with_indices_backward$default_stride(%dy: !torch.vtensor<[1,2,2,2,2],f32>, %x: !torch.vtensor<[1,2,4,4,4],f32>, %i: !torch.vtensor<[1,2,2,2,2],si64>) -> !torch.vtensor<[1,2,4,4,4],f32> {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %false = torch.constant.bool false
  %kernel = torch.prim.ListConstruct %int2 : (!torch.int) -> !torch.list<int>
  %stride = torch.prim.ListConstruct  : () -> !torch.list<int>
  %padding = torch.prim.ListConstruct %int0 : (!torch.int) -> !torch.list<int>
  %dilation = torch.prim.ListConstruct %int1 : (!torch.int) -> !torch.list<int>
  %0 = torch.aten.max_pool3d_with_indices_backward %dy, %x, %kernel, %stride, %padding, %dilation, %false, %i : !torch.vtensor<[1,2,2,2,2],f32>, !torch.vtensor<[1,2,4,4,4],f32>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.vtensor<[1,2,2,2,2],si64> -> !torch.vtensor<[1,2,4,4,4],f32>
  return %0 : !torch.vtensor<[1,2,4,4,4],f32>
}

// -----

// CHECK-LABEL: func.func @avg_pool2d_backward
// CHECK:         "ipu.avg_pool_grad"(%{{.*}}) {ceil_mode = true, count_include_pad = false, divisor = 0 : i64, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x2x5x5xf32>) -> tensor<1x2x8x8xf32>
func.func @avg_pool2d_backward(%dy: !torch.vtensor<[1,2,5,5],f32>, %x: !torch.vtensor<[1,2,8,8],f32>) -> !torch.vtensor<[1,2,8,8],f32> {
  %none = torch.constant.none
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int3 = torch.constant.int 3
  %true = torch.constant.bool true
  %false = torch.constant.bool false
  %kernel = torch.prim.ListConstruct %int3, %int3 : (!torch.int, !torch.int) -> !torch.list<int>
  %stride = torch.prim.ListConstruct %int2, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
  %padding = torch.prim.ListConstruct %int1, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.aten.avg_pool2d_backward %dy, %x, %kernel, %stride, %padding, %true, %false, %none : !torch.vtensor<[1,2,5,5],f32>, !torch.vtensor<[1,2,8,8],f32>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.bool, !torch.none -> !torch.vtensor<[1,2,8,8],f32>
  return %0 : !torch.vtensor<[1,2,8,8],f32>
}

// -----

// CHECK-LABEL: func.func @avg_pool3d_backward$divisor
// CHECK:         "ipu.avg_pool_grad"(%{{.*}}) {ceil_mode = false, count_include_pad = true, divisor = 3 : i64, kernel = array<i64: 2, 2, 2>, padding = array<i64: 0, 0, 0>, strides = array<i64: 2, 2, 2>} : (tensor<1x2x2x2x2xf32>) -> tensor<1x2x4x4x4xf32>
func.func @avg_pool3d_backward$divisor(%dy: !torch.vtensor<[1,2,2,2,2],f32>, %x: !torch.vtensor<[1,2,4,4,4],f32>) -> !torch.vtensor<[1,2,4,4,4],f32> {
  %int0 = torch.constant.int 0
  %int2 = torch.constant.int 2
  %int3 = torch.constant.int 3
  %true = torch.constant.bool true
  %false = torch.constant.bool false
  %kernel = torch.prim.ListConstruct %int2, %int2, %int2 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %stride = torch.prim.ListConstruct %int2, %int2, %int2 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %padding = torch.prim.ListConstruct %int0, %int0, %int0 : (!torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.aten.avg_pool3d_backward %dy, %x, %kernel, %stride, %padding, %false, %true, %int3 : !torch.vtensor<[1,2,2,2,2],f32>, !torch.vtensor<[1,2,4,4,4],f32>, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.bool, !torch.int -> !torch.vtensor<[1,2,4,4,4],f32>
  return %0 : !torch.vtensor<[1,2,4,4,4],f32>
}

// -----

// The output size is the gradient's trailing dims.
// CHECK-LABEL: func.func @adaptive_avg_pool2d_backward
// CHECK:         "ipu.adaptive_avg_pool_grad"(%{{.*}}) {output_size = array<i64: 3, 5>} : (tensor<1x2x3x5xf32>) -> tensor<1x2x8x8xf32>
func.func @adaptive_avg_pool2d_backward(%dy: !torch.vtensor<[1,2,3,5],f32>, %x: !torch.vtensor<[1,2,8,8],f32>) -> !torch.vtensor<[1,2,8,8],f32> {
  %0 = torch.aten._adaptive_avg_pool2d_backward %dy, %x : !torch.vtensor<[1,2,3,5],f32>, !torch.vtensor<[1,2,8,8],f32> -> !torch.vtensor<[1,2,8,8],f32>
  return %0 : !torch.vtensor<[1,2,8,8],f32>
}

// -----

// CHECK-LABEL: func.func @adaptive_avg_pool3d_backward
// CHECK:         "ipu.adaptive_avg_pool_grad"(%{{.*}}) {output_size = array<i64: 2, 3, 2>} : (tensor<1x2x2x3x2xf32>) -> tensor<1x2x5x6x5xf32>
func.func @adaptive_avg_pool3d_backward(%dy: !torch.vtensor<[1,2,2,3,2],f32>, %x: !torch.vtensor<[1,2,5,6,5],f32>) -> !torch.vtensor<[1,2,5,6,5],f32> {
  %0 = torch.aten._adaptive_avg_pool3d_backward %dy, %x : !torch.vtensor<[1,2,2,3,2],f32>, !torch.vtensor<[1,2,5,6,5],f32> -> !torch.vtensor<[1,2,5,6,5],f32>
  return %0 : !torch.vtensor<[1,2,5,6,5],f32>
}

// -----

// Adaptive max pooling whose indices are used (by its gradient) computes them.
// CHECK-LABEL: func.func @adaptive_max_pool2d$indices
// CHECK:         %[[P:.*]]:2 = "ipu.adaptive_max_pool_with_indices"(%{{.*}}) {output_size = array<i64: 3, 5>} : (tensor<1x2x8x8xf32>) -> (tensor<1x2x3x5xf32>, tensor<1x2x3x5xi64>)
// CHECK-DAG:     torch_c.from_builtin_tensor %[[P]]#0
// CHECK-DAG:     torch_c.from_builtin_tensor %[[P]]#1
func.func @adaptive_max_pool2d$indices(%x: !torch.vtensor<[1,2,8,8],f32>) -> (!torch.vtensor<[1,2,3,5],f32>, !torch.vtensor<[1,2,3,5],si64>) {
  %int3 = torch.constant.int 3
  %int5 = torch.constant.int 5
  %size = torch.prim.ListConstruct %int3, %int5 : (!torch.int, !torch.int) -> !torch.list<int>
  %0, %1 = torch.aten.adaptive_max_pool2d %x, %size : !torch.vtensor<[1,2,8,8],f32>, !torch.list<int> -> !torch.vtensor<[1,2,3,5],f32>, !torch.vtensor<[1,2,3,5],si64>
  return %0, %1 : !torch.vtensor<[1,2,3,5],f32>, !torch.vtensor<[1,2,3,5],si64>
}
