// RUN: ipu-opt %s --ipu-convert-poptorch-ops --ipu-check-torch-ops --split-input-file --verify-diagnostics

// An opaque aten operator whose lowering declines stays for ipu-check-torch-ops, which
// reports the lowering's reason.

func.func @upsample_bilinear2d_aa$rank3(%x: !torch.vtensor<[2,3,4],f32>) -> !torch.vtensor<[2,6,8],f32> {
  %int6 = torch.constant.int 6
  %int8 = torch.constant.int 8
  %false = torch.constant.bool false
  %none = torch.constant.none
  %size = torch.prim.ListConstruct %int6, %int8 : (!torch.int, !torch.int) -> !torch.list<int>
  // expected-error @+1 {{unsupported op 'torch.aten._upsample_bilinear2d_aa': antialiased resampling of rank 3 (2 spatial dims expected)}}
  %0 = torch.operator "torch.aten._upsample_bilinear2d_aa"(%x, %size, %false, %none, %none) : (!torch.vtensor<[2,3,4],f32>, !torch.list<int>, !torch.bool, !torch.none, !torch.none) -> !torch.vtensor<[2,6,8],f32>
  return %0 : !torch.vtensor<[2,6,8],f32>
}

// -----

func.func @weight_norm_interface_backward$norms_shape(%gw: !torch.vtensor<[4,3],f32>, %v: !torch.vtensor<[4,3],f32>, %g: !torch.vtensor<[4,1],f32>, %n: !torch.vtensor<[4],f32>) -> (!torch.vtensor<[4,3],f32>, !torch.vtensor<[4,1],f32>) {
  %int0 = torch.constant.int 0
  // expected-error @+1 {{unsupported op 'torch.aten._weight_norm_interface_backward': weight norms of shape [4] for a weight of shape [4, 3] normalised along dim 0}}
  %0:2 = torch.operator "torch.aten._weight_norm_interface_backward"(%gw, %v, %g, %n, %int0) : (!torch.vtensor<[4,3],f32>, !torch.vtensor<[4,3],f32>, !torch.vtensor<[4,1],f32>, !torch.vtensor<[4],f32>, !torch.int) -> (!torch.vtensor<[4,3],f32>, !torch.vtensor<[4,1],f32>)
  return %0#0, %0#1 : !torch.vtensor<[4,3],f32>, !torch.vtensor<[4,1],f32>
}

// -----

// Grid sampling's gradient with reflection padding (2) is not lowered.
func.func @grid_sampler_2d_backward$reflection(%g: !torch.vtensor<[1,2,1,2],f32>, %x: !torch.vtensor<[1,2,2,3],f32>, %grid: !torch.vtensor<[1,1,2,2],f32>) -> (!torch.vtensor<[1,2,2,3],f32>, !torch.vtensor<[1,1,2,2],f32>) {
  %int0 = torch.constant.int 0
  %int2 = torch.constant.int 2
  %false = torch.constant.bool false
  %true = torch.constant.bool true
  %mask = torch.prim.ListConstruct %true, %true : (!torch.bool, !torch.bool) -> !torch.list<bool>
  // expected-error @+1 {{unsupported op 'torch.aten.grid_sampler_2d_backward': the gradient of grid sampling with bilinear interpolation and reflection padding (bilinear or nearest with zeros or border padding are supported)}}
  %0:2 = torch.operator "torch.aten.grid_sampler_2d_backward"(%g, %x, %grid, %int0, %int2, %false, %mask) : (!torch.vtensor<[1,2,1,2],f32>, !torch.vtensor<[1,2,2,3],f32>, !torch.vtensor<[1,1,2,2],f32>, !torch.int, !torch.int, !torch.bool, !torch.list<bool>) -> (!torch.vtensor<[1,2,2,3],f32>, !torch.vtensor<[1,1,2,2],f32>)
  return %0#0, %0#1 : !torch.vtensor<[1,2,2,3],f32>, !torch.vtensor<[1,1,2,2],f32>
}

// -----

// The nuclear norm and the matrix 2-norms need a singular value decomposition, which
// PopTorch refuses too.
func.func @linalg_svd$refused(%x: !torch.vtensor<[4,4],f32>) -> (!torch.vtensor<[4,4],f32>, !torch.vtensor<[4],f32>, !torch.vtensor<[4,4],f32>) {
  %false = torch.constant.bool false
  %none = torch.constant.none
  // expected-error @+1 {{unsupported op 'torch.aten._linalg_svd': singular value decompositions are not supported (PopTorch: "Matrix nuclear norm is not supported."): the nuclear norm (ord='nuc') and the matrix 2-norms (ord=2 or -2 over two dims) need one; use ord='fro', 1, -1, inf or -inf, or a vector norm}}
  %0:3 = torch.operator "torch.aten._linalg_svd"(%x, %false, %false, %none) : (!torch.vtensor<[4,4],f32>, !torch.bool, !torch.bool, !torch.none) -> (!torch.vtensor<[4,4],f32>, !torch.vtensor<[4],f32>, !torch.vtensor<[4,4],f32>)
  return %0#0, %0#1, %0#2 : !torch.vtensor<[4,4],f32>, !torch.vtensor<[4],f32>, !torch.vtensor<[4,4],f32>
}
