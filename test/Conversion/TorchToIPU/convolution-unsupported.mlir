// RUN: ipu-opt %s --ipu-convert-torch-to-ipu --split-input-file --verify-diagnostics

// Only nearest interpolation lowers; the others name the mode.
func.func @interpolate$bilinear(%x: !torch.vtensor<[1,3,4,4],f32>) -> !torch.vtensor<[1,3,8,8],f32> {
  %false = torch.constant.bool false
  %str = torch.constant.str "bilinear"
  %none = torch.constant.none
  %float2.0 = torch.constant.float 2.000000e+00
  %scale = torch.prim.ListConstruct %float2.0, %float2.0 : (!torch.float, !torch.float) -> !torch.list<float>
  // expected-error @+1 {{unsupported op 'torch.aten.__interpolate.size_list_scale_list': interpolation mode 'bilinear' (only 'nearest' is supported)}}
  %0 = torch.aten.__interpolate.size_list_scale_list %x, %none, %scale, %str, %false, %none, %false : !torch.vtensor<[1,3,4,4],f32>, !torch.none, !torch.list<float>, !torch.str, !torch.bool, !torch.none, !torch.bool -> !torch.vtensor<[1,3,8,8],f32>
  return %0 : !torch.vtensor<[1,3,8,8],f32>
}

// -----

// Convolution attributes must be constants.
func.func @convolution$dynamic_stride(%x: !torch.vtensor<[1,3,8],f32>, %w: !torch.vtensor<[4,3,3],f32>, %s: !torch.int) -> !torch.vtensor<[1,4,?],f32> {
  %none = torch.constant.none
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %false = torch.constant.bool false
  %stride = torch.prim.ListConstruct %s : (!torch.int) -> !torch.list<int>
  %padding = torch.prim.ListConstruct %int0 : (!torch.int) -> !torch.list<int>
  %dilation = torch.prim.ListConstruct %int1 : (!torch.int) -> !torch.list<int>
  // expected-error @+1 {{unsupported op 'torch.aten.convolution': operand %arg2 is not a constant (argument)}}
  %0 = torch.aten.convolution %x, %w, %none, %stride, %padding, %dilation, %false, %padding, %int1 : !torch.vtensor<[1,3,8],f32>, !torch.vtensor<[4,3,3],f32>, !torch.none, !torch.list<int>, !torch.list<int>, !torch.list<int>, !torch.bool, !torch.list<int>, !torch.int -> !torch.vtensor<[1,4,?],f32>
  return %0 : !torch.vtensor<[1,4,?],f32>
}
