// RUN: ipu-opt %s --ipu-convert-poptorch-ops --canonicalize --split-input-file | FileCheck %s

// aten ops torch-mlir has no op for arrive as opaque `torch.operator`s; the conversion
// families' OPERATORS lower them in ipu-convert-poptorch-ops, before torch-mlir's backend
// pipeline (which would reject them).

// Antialiased resampling is separable: A_h @ x @ A_w^T with constant matrices of
// PyTorch's filter weights. Bilinear 2 -> 4 rows; the 3 -> 3 columns are the identity,
// and that product is left out.
// CHECK-LABEL: func.func @upsample_bilinear2d_aa
// CHECK:         %[[X:.*]] = torch_c.to_builtin_tensor %arg0 : !torch.vtensor<[1,2,2,3],f32> -> tensor<1x2x2x3xf32>
// CHECK-NEXT:    %[[H:.*]] = "ipu.constant"() {value = dense<{{\[}}[1.000000e+00, 0.000000e+00], [7.500000e-01, 2.500000e-01], [2.500000e-01, 7.500000e-01], [0.000000e+00, 1.000000e+00]]> : tensor<4x2xf32>} : () -> tensor<4x2xf32>
// CHECK-NEXT:    %[[Y:.*]] = "ipu.matmul"(%[[H]], %[[X]]) : (tensor<4x2xf32>, tensor<1x2x2x3xf32>) -> tensor<1x2x4x3xf32>
// CHECK-NEXT:    torch_c.from_builtin_tensor %[[Y]] : tensor<1x2x4x3xf32> -> !torch.vtensor<[1,2,4,3],f32>
// CHECK-NOT:     "ipu.matmul"
func.func @upsample_bilinear2d_aa(%x: !torch.vtensor<[1,2,2,3],f32>) -> !torch.vtensor<[1,2,4,3],f32> {
  %int4 = torch.constant.int 4
  %int3 = torch.constant.int 3
  %false = torch.constant.bool false
  %none = torch.constant.none
  %size = torch.prim.ListConstruct %int4, %int3 : (!torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.operator "torch.aten._upsample_bilinear2d_aa"(%x, %size, %false, %none, %none) : (!torch.vtensor<[1,2,2,3],f32>, !torch.list<int>, !torch.bool, !torch.none, !torch.none) -> !torch.vtensor<[1,2,4,3],f32>
  return %0 : !torch.vtensor<[1,2,4,3],f32>
}

// -----

// The gradient is A_h^T @ grad @ A_w: rows 4 -> 2 (the forward's 2 -> 4 transposed),
// columns 1 -> 3 (the forward's 3 -> 1 downsampling, a widened triangle filter).
// CHECK-LABEL: func.func @upsample_bilinear2d_aa_backward
// CHECK:         %[[G:.*]] = torch_c.to_builtin_tensor %arg0 : !torch.vtensor<[1,2,4,1],f32> -> tensor<1x2x4x1xf32>
// CHECK-NEXT:    %[[H:.*]] = "ipu.constant"() {value = dense<{{\[}}[1.000000e+00, 7.500000e-01, 2.500000e-01, 0.000000e+00], [0.000000e+00, 2.500000e-01, 7.500000e-01, 1.000000e+00]]> : tensor<2x4xf32>} : () -> tensor<2x4xf32>
// CHECK-NEXT:    %[[R:.*]] = "ipu.matmul"(%[[H]], %[[G]]) : (tensor<2x4xf32>, tensor<1x2x4x1xf32>) -> tensor<1x2x2x1xf32>
// CHECK-NEXT:    %[[W:.*]] = "ipu.constant"() {value = dense<{{\[}}[0.285714269, 0.428571433, 0.285714269]]> : tensor<1x3xf32>} : () -> tensor<1x3xf32>
// CHECK-NEXT:    %[[D:.*]] = "ipu.matmul"(%[[R]], %[[W]]) : (tensor<1x2x2x1xf32>, tensor<1x3xf32>) -> tensor<1x2x2x3xf32>
// CHECK-NEXT:    torch_c.from_builtin_tensor %[[D]] : tensor<1x2x2x3xf32> -> !torch.vtensor<[1,2,2,3],f32>
func.func @upsample_bilinear2d_aa_backward(%g: !torch.vtensor<[1,2,4,1],f32>) -> !torch.vtensor<[1,2,2,3],f32> {
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %int3 = torch.constant.int 3
  %int4 = torch.constant.int 4
  %false = torch.constant.bool false
  %none = torch.constant.none
  %size = torch.prim.ListConstruct %int4, %int1 : (!torch.int, !torch.int) -> !torch.list<int>
  %input = torch.prim.ListConstruct %int1, %int2, %int2, %int3 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.operator "torch.aten._upsample_bilinear2d_aa_backward"(%g, %size, %input, %false, %none, %none) : (!torch.vtensor<[1,2,4,1],f32>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.none, !torch.none) -> !torch.vtensor<[1,2,2,3],f32>
  return %0 : !torch.vtensor<[1,2,2,3],f32>
}

// -----

// Bicubic (Keys' kernel, a = -0.5) 3 -> 2 rows and 2 -> 2 columns (the identity).
// CHECK-LABEL: func.func @upsample_bicubic2d_aa
// CHECK:         %[[H:.*]] = "ipu.constant"() {value = dense<{{\[}}[0.650080263, 0.390048146, -0.0401284248], [-0.0401284248, 0.390048146, 0.650080263]]> : tensor<2x3xf32>} : () -> tensor<2x3xf32>
// CHECK-NEXT:    "ipu.matmul"(%[[H]], %{{.*}}) : (tensor<2x3xf32>, tensor<2x1x3x2xf32>) -> tensor<2x1x2x2xf32>
// CHECK-NOT:     "ipu.matmul"
func.func @upsample_bicubic2d_aa(%x: !torch.vtensor<[2,1,3,2],f32>) -> !torch.vtensor<[2,1,2,2],f32> {
  %int2 = torch.constant.int 2
  %false = torch.constant.bool false
  %none = torch.constant.none
  %size = torch.prim.ListConstruct %int2, %int2 : (!torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.operator "torch.aten._upsample_bicubic2d_aa"(%x, %size, %false, %none, %none) : (!torch.vtensor<[2,1,3,2],f32>, !torch.list<int>, !torch.bool, !torch.none, !torch.none) -> !torch.vtensor<[2,1,2,2],f32>
  return %0 : !torch.vtensor<[2,1,2,2],f32>
}

// -----

// The gradient of w = v * g / norms (norms over dims 0 and 1, dim 2 kept), as PyTorch's
// kernel computes it: s = sum(grad_w * v), grad_g = s / norms, a = g / norms,
// grad_v = a * grad_w - (a * grad_g / norms) * v.
// CHECK-LABEL: func.func @weight_norm_interface_backward
// CHECK-DAG:     %[[GW:.*]] = torch_c.to_builtin_tensor %arg0 : !torch.vtensor<[4,2,3],f32> -> tensor<4x2x3xf32>
// CHECK-DAG:     %[[V:.*]] = torch_c.to_builtin_tensor %arg1 : !torch.vtensor<[4,2,3],f32> -> tensor<4x2x3xf32>
// CHECK-DAG:     %[[G:.*]] = torch_c.to_builtin_tensor %arg2 : !torch.vtensor<[1,1,3],f32> -> tensor<1x1x3xf32>
// CHECK-DAG:     %[[N:.*]] = torch_c.to_builtin_tensor %arg3 : !torch.vtensor<[1,1,3],f32> -> tensor<1x1x3xf32>
// CHECK:         %[[P:.*]] = "ipu.mul"(%[[GW]], %[[V]]) : (tensor<4x2x3xf32>, tensor<4x2x3xf32>) -> tensor<4x2x3xf32>
// CHECK-NEXT:    %[[S:.*]] = "ipu.reduce"(%[[P]]) {dims = array<i64: 0, 1>, keepdim = true, kind = "sum"} : (tensor<4x2x3xf32>) -> tensor<1x1x3xf32>
// CHECK-NEXT:    %[[GG:.*]] = "ipu.div"(%[[S]], %[[N]]) : (tensor<1x1x3xf32>, tensor<1x1x3xf32>) -> tensor<1x1x3xf32>
// CHECK-NEXT:    %[[A:.*]] = "ipu.div"(%[[G]], %[[N]]) : (tensor<1x1x3xf32>, tensor<1x1x3xf32>) -> tensor<1x1x3xf32>
// CHECK-NEXT:    %[[AG:.*]] = "ipu.mul"(%[[A]], %[[GG]]) : (tensor<1x1x3xf32>, tensor<1x1x3xf32>) -> tensor<1x1x3xf32>
// CHECK-NEXT:    %[[B:.*]] = "ipu.div"(%[[AG]], %[[N]]) : (tensor<1x1x3xf32>, tensor<1x1x3xf32>) -> tensor<1x1x3xf32>
// CHECK-NEXT:    %[[L:.*]] = "ipu.mul"(%[[A]], %[[GW]]) : (tensor<1x1x3xf32>, tensor<4x2x3xf32>) -> tensor<4x2x3xf32>
// CHECK-NEXT:    %[[R:.*]] = "ipu.mul"(%[[B]], %[[V]]) : (tensor<1x1x3xf32>, tensor<4x2x3xf32>) -> tensor<4x2x3xf32>
// CHECK-NEXT:    %[[GV:.*]] = "ipu.sub"(%[[L]], %[[R]]) : (tensor<4x2x3xf32>, tensor<4x2x3xf32>) -> tensor<4x2x3xf32>
// CHECK-DAG:     %[[TV:.*]] = torch_c.from_builtin_tensor %[[GV]]
// CHECK-DAG:     %[[TG:.*]] = torch_c.from_builtin_tensor %[[GG]]
// CHECK:         return %[[TV]], %[[TG]]
func.func @weight_norm_interface_backward(%gw: !torch.vtensor<[4,2,3],f32>, %v: !torch.vtensor<[4,2,3],f32>, %g: !torch.vtensor<[1,1,3],f32>, %n: !torch.vtensor<[1,1,3],f32>) -> (!torch.vtensor<[4,2,3],f32>, !torch.vtensor<[1,1,3],f32>) {
  %int2 = torch.constant.int 2
  %0:2 = torch.operator "torch.aten._weight_norm_interface_backward"(%gw, %v, %g, %n, %int2) : (!torch.vtensor<[4,2,3],f32>, !torch.vtensor<[4,2,3],f32>, !torch.vtensor<[1,1,3],f32>, !torch.vtensor<[1,1,3],f32>, !torch.int) -> (!torch.vtensor<[4,2,3],f32>, !torch.vtensor<[1,1,3],f32>)
  return %0#0, %0#1 : !torch.vtensor<[4,2,3],f32>, !torch.vtensor<[1,1,3],f32>
}

// -----

// Replication padding (left 1, right 0, top 2, bottom 0): output column o copies input
// column clamp(o - 1); the gradient adds each output's into the one it copies, one
// 0/1 matrix product per dim (the last first).
// CHECK-LABEL: func.func @replication_pad2d_backward
// CHECK:         %[[G:.*]] = torch_c.to_builtin_tensor %arg0 : !torch.vtensor<[1,2,5,4],f32> -> tensor<1x2x5x4xf32>
// CHECK-NEXT:    %[[W:.*]] = "ipu.constant"() {value = dense<{{\[}}[1.000000e+00, 0.000000e+00, 0.000000e+00], [1.000000e+00, 0.000000e+00, 0.000000e+00], [0.000000e+00, 1.000000e+00, 0.000000e+00], [0.000000e+00, 0.000000e+00, 1.000000e+00]]> : tensor<4x3xf32>} : () -> tensor<4x3xf32>
// CHECK-NEXT:    %[[C:.*]] = "ipu.matmul"(%[[G]], %[[W]]) : (tensor<1x2x5x4xf32>, tensor<4x3xf32>) -> tensor<1x2x5x3xf32>
// CHECK-NEXT:    %[[H:.*]] = "ipu.constant"() {value = dense<{{\[}}[1.000000e+00, 1.000000e+00, 1.000000e+00, 0.000000e+00, 0.000000e+00], [0.000000e+00, 0.000000e+00, 0.000000e+00, 1.000000e+00, 0.000000e+00], [0.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00, 1.000000e+00]]> : tensor<3x5xf32>} : () -> tensor<3x5xf32>
// CHECK-NEXT:    %[[R:.*]] = "ipu.matmul"(%[[H]], %[[C]]) : (tensor<3x5xf32>, tensor<1x2x5x3xf32>) -> tensor<1x2x3x3xf32>
// CHECK-NEXT:    torch_c.from_builtin_tensor %[[R]] : tensor<1x2x3x3xf32> -> !torch.vtensor<[1,2,3,3],f32>
func.func @replication_pad2d_backward(%g: !torch.vtensor<[1,2,5,4],f32>, %x: !torch.vtensor<[1,2,3,3],f32>) -> !torch.vtensor<[1,2,3,3],f32> {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %pad = torch.prim.ListConstruct %int1, %int0, %int2, %int0 : (!torch.int, !torch.int, !torch.int, !torch.int) -> !torch.list<int>
  %0 = torch.operator "torch.aten.replication_pad2d_backward"(%g, %x, %pad) : (!torch.vtensor<[1,2,5,4],f32>, !torch.vtensor<[1,2,3,3],f32>, !torch.list<int>) -> !torch.vtensor<[1,2,3,3],f32>
  return %0 : !torch.vtensor<[1,2,3,3],f32>
}

// -----

// Bilinear, zeros padding, half-pixel grid (interpolation 0, padding 0, align_corners
// false): x = ((gx + 1) * W - 1) / 2; four corners, each read from the flattened input
// (its values for the grid gradient) and added to (the input gradient, one scatter sum
// with each pixel's four corners in turn); the grid gradient is summed over channels
// and scaled by W / 2 and H / 2.
// CHECK-LABEL: func.func @grid_sampler_2d_backward
// CHECK-DAG:     %[[G:.*]] = torch_c.to_builtin_tensor %arg0 : !torch.vtensor<[1,2,1,2],f32> -> tensor<1x2x1x2xf32>
// CHECK-DAG:     %[[X:.*]] = torch_c.to_builtin_tensor %arg1 : !torch.vtensor<[1,2,2,3],f32> -> tensor<1x2x2x3xf32>
// CHECK-DAG:     %[[GRID:.*]] = torch_c.to_builtin_tensor %arg2 : !torch.vtensor<[1,1,2,2],f32> -> tensor<1x1x2x2xf32>
// CHECK:         %[[GX:.*]] = "ipu.slice"(%[[GRID]]) {ends = array<i64: 1, 1, 2, 1>, starts = array<i64: 0, 0, 0, 0>, steps = array<i64: 1, 1, 1, 1>}
// CHECK-NEXT:    %[[GX2:.*]] = "ipu.reshape"(%[[GX]]) : (tensor<1x1x2x1xf32>) -> tensor<1x1x2xf32>
// CHECK-NEXT:    %[[ONE:.*]] = "ipu.constant"() {value = dense<1.000000e+00> : tensor<f32>}
// CHECK-NEXT:    %[[P1:.*]] = "ipu.add"(%[[GX2]], %[[ONE]])
// CHECK-NEXT:    %[[WIDTH:.*]] = "ipu.constant"() {value = dense<3.000000e+00> : tensor<f32>}
// CHECK-NEXT:    %[[TIMES:.*]] = "ipu.mul"(%[[P1]], %[[WIDTH]])
// CHECK-NEXT:    %[[ONE_AGAIN:.*]] = "ipu.constant"() {value = dense<1.000000e+00> : tensor<f32>}
// CHECK-NEXT:    %[[MINUS:.*]] = "ipu.sub"(%[[TIMES]], %[[ONE_AGAIN]])
// CHECK-NEXT:    %[[TWO:.*]] = "ipu.constant"() {value = dense<2.000000e+00> : tensor<f32>}
// CHECK-NEXT:    %[[IX:.*]] = "ipu.div"(%[[MINUS]], %[[TWO]])
// CHECK:         %[[FLAT:.*]] = "ipu.reshape"(%[[X]]) : (tensor<1x2x2x3xf32>) -> tensor<1x2x6xf32>
// CHECK:         "ipu.floor"(%[[IX]])
// CHECK-COUNT-4: "ipu.gather"(%[[FLAT]], %{{.*}}) {dim = 2 : i64} : (tensor<1x2x6xf32>, tensor<1x2x2xi32>) -> tensor<1x2x2xf32>
// CHECK:         %[[ZEROS:.*]] = "ipu.constant"() {value = dense<0.000000e+00> : tensor<1x2x6xf32>}
// CHECK:         %[[SUM:.*]] = "ipu.scatter"(%[[ZEROS]], %{{.*}}, %{{.*}}) {dim = 2 : i64, include_self = true, reduction = "sum"} : (tensor<1x2x6xf32>, tensor<1x2x8xi32>, tensor<1x2x8xf32>) -> tensor<1x2x6xf32>
// CHECK-NEXT:    %[[DX:.*]] = "ipu.reshape"(%[[SUM]]) : (tensor<1x2x6xf32>) -> tensor<1x2x2x3xf32>
// CHECK-NEXT:    "ipu.reduce"(%{{.*}}) {dims = array<i64: 1>, keepdim = false, kind = "sum"} : (tensor<1x2x2xf32>) -> tensor<1x2xf32>
// CHECK:         %[[HALF_W:.*]] = "ipu.constant"() {value = dense<1.500000e+00> : tensor<f32>}
// CHECK-NEXT:    "ipu.mul"(%{{.*}}, %[[HALF_W]])
// CHECK:         "ipu.reduce"(%{{.*}}) {dims = array<i64: 1>, keepdim = false, kind = "sum"} : (tensor<1x2x2xf32>) -> tensor<1x2xf32>
// CHECK:         %[[DGRID:.*]] = "ipu.concat"(%{{.*}}, %{{.*}}) {dim = 3 : i64} : (tensor<1x1x2x1xf32>, tensor<1x1x2x1xf32>) -> tensor<1x1x2x2xf32>
// CHECK-DAG:     torch_c.from_builtin_tensor %[[DX]]
// CHECK-DAG:     torch_c.from_builtin_tensor %[[DGRID]]
func.func @grid_sampler_2d_backward(%g: !torch.vtensor<[1,2,1,2],f32>, %x: !torch.vtensor<[1,2,2,3],f32>, %grid: !torch.vtensor<[1,1,2,2],f32>) -> (!torch.vtensor<[1,2,2,3],f32>, !torch.vtensor<[1,1,2,2],f32>) {
  %int0 = torch.constant.int 0
  %false = torch.constant.bool false
  %true = torch.constant.bool true
  %mask = torch.prim.ListConstruct %true, %true : (!torch.bool, !torch.bool) -> !torch.list<bool>
  %0:2 = torch.operator "torch.aten.grid_sampler_2d_backward"(%g, %x, %grid, %int0, %int0, %false, %mask) : (!torch.vtensor<[1,2,1,2],f32>, !torch.vtensor<[1,2,2,3],f32>, !torch.vtensor<[1,1,2,2],f32>, !torch.int, !torch.int, !torch.bool, !torch.list<bool>) -> (!torch.vtensor<[1,2,2,3],f32>, !torch.vtensor<[1,1,2,2],f32>)
  return %0#0, %0#1 : !torch.vtensor<[1,2,2,3],f32>, !torch.vtensor<[1,1,2,2],f32>
}

// -----

// Nearest (interpolation 1), border padding (1), corner-aligned grid: one rounded,
// clipped corner per output, nothing gathered, and a zero grid gradient.
// CHECK-LABEL: func.func @grid_sampler_2d_backward$nearest
// CHECK-NOT:     "ipu.gather"
// CHECK:         "ipu.round"
// CHECK-NOT:     "ipu.gather"
// CHECK:         "ipu.scatter"(%{{.*}}, %{{.*}}, %{{.*}}) {dim = 2 : i64, include_self = true, reduction = "sum"} : (tensor<1x2x6xf32>, tensor<1x2x2xi32>, tensor<1x2x2xf32>) -> tensor<1x2x6xf32>
// CHECK:         %[[ZERO:.*]] = "ipu.constant"() {value = dense<0.000000e+00> : tensor<1x1x2x2xf32>}
// CHECK:         torch_c.from_builtin_tensor %[[ZERO]]
func.func @grid_sampler_2d_backward$nearest(%g: !torch.vtensor<[1,2,1,2],f32>, %x: !torch.vtensor<[1,2,2,3],f32>, %grid: !torch.vtensor<[1,1,2,2],f32>) -> (!torch.vtensor<[1,2,2,3],f32>, !torch.vtensor<[1,1,2,2],f32>) {
  %int1 = torch.constant.int 1
  %true = torch.constant.bool true
  %mask = torch.prim.ListConstruct %true, %true : (!torch.bool, !torch.bool) -> !torch.list<bool>
  %0:2 = torch.operator "torch.aten.grid_sampler_2d_backward"(%g, %x, %grid, %int1, %int1, %true, %mask) : (!torch.vtensor<[1,2,1,2],f32>, !torch.vtensor<[1,2,2,3],f32>, !torch.vtensor<[1,1,2,2],f32>, !torch.int, !torch.int, !torch.bool, !torch.list<bool>) -> (!torch.vtensor<[1,2,2,3],f32>, !torch.vtensor<[1,1,2,2],f32>)
  return %0#0, %0#1 : !torch.vtensor<[1,2,2,3],f32>, !torch.vtensor<[1,1,2,2],f32>
}

// -----

// torch-mlir's backend pipeline decomposes RReLU's gradient with a fixed slope wrongly
// (BEFORE_BACKEND): with the mean slope (0.125 + 0.375) / 2, grad where x > 0 and
// 0.25 * grad elsewhere; with random slopes (training), grad * noise.
// CHECK-LABEL: func.func @rrelu_with_noise_backward
// CHECK:         %[[G:.*]] = torch_c.to_builtin_tensor %arg0 : !torch.vtensor<[2,3],f32> -> tensor<2x3xf32>
// CHECK-NEXT:    %[[X:.*]] = torch_c.to_builtin_tensor %arg1 : !torch.vtensor<[2,3],f32> -> tensor<2x3xf32>
// CHECK-NEXT:    %[[ZERO:.*]] = "ipu.constant"() {value = dense<0.000000e+00> : tensor<f32>} : () -> tensor<f32>
// CHECK-NEXT:    %[[POS:.*]] = "ipu.gt"(%[[X]], %[[ZERO]]) : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xi1>
// CHECK-NEXT:    %[[SLOPE:.*]] = "ipu.constant"() {value = dense<2.500000e-01> : tensor<f32>} : () -> tensor<f32>
// CHECK-NEXT:    %[[SCALED:.*]] = "ipu.mul"(%[[G]], %[[SLOPE]]) : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
// CHECK-NEXT:    "ipu.select"(%[[POS]], %[[G]], %[[SCALED]]) : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK:         %[[NOISE:.*]] = torch_c.to_builtin_tensor %arg2 : !torch.vtensor<[2,3],f32> -> tensor<2x3xf32>
// CHECK-NEXT:    "ipu.mul"(%{{.*}}, %[[NOISE]]) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NOT:     torch.aten.rrelu_with_noise_backward
func.func @rrelu_with_noise_backward(%g: !torch.vtensor<[2,3],f32>, %x: !torch.vtensor<[2,3],f32>, %noise: !torch.vtensor<[2,3],f32>) -> (!torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>) {
  %lower = torch.constant.float 1.250000e-01
  %upper = torch.constant.float 3.750000e-01
  %false = torch.constant.bool false
  %true = torch.constant.bool true
  %0 = torch.aten.rrelu_with_noise_backward %g, %x, %noise, %lower, %upper, %false, %false : !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>, !torch.float, !torch.float, !torch.bool, !torch.bool -> !torch.vtensor<[2,3],f32>
  %1 = torch.aten.rrelu_with_noise_backward %g, %x, %noise, %lower, %upper, %true, %false : !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>, !torch.float, !torch.float, !torch.bool, !torch.bool -> !torch.vtensor<[2,3],f32>
  return %0, %1 : !torch.vtensor<[2,3],f32>, !torch.vtensor<[2,3],f32>
}
