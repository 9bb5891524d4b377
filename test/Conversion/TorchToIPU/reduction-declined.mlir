// RUN: ipu-opt %s --ipu-convert-torch-to-ipu --split-input-file --verify-diagnostics

// Reductions the conversion declines, reported at the op with the lowering's reason.

// The IPU compiles for fixed shapes: the reduced dims must be constants.
func.func @sum$dynamic_dims(%x: !torch.vtensor<[3,4],f32>, %d: !torch.int) -> !torch.vtensor<[3],f32> {
  %none = torch.constant.none
  %false = torch.constant.bool false
  %dims = torch.prim.ListConstruct %d : (!torch.int) -> !torch.list<int>
  // expected-error @+1 {{unsupported op 'torch.aten.sum.dim_IntList': operand %arg1 is not a constant (argument)}}
  %0 = torch.aten.sum.dim_IntList %x, %dims, %false, %none : !torch.vtensor<[3,4],f32>, !torch.list<int>, !torch.bool, !torch.none -> !torch.vtensor<[3],f32>
  return %0 : !torch.vtensor<[3],f32>
}

// -----

// Matrix norms other than Frobenius (here the spectral norm) have no lowering.
func.func @linalg_norm$matrix(%x: !torch.vtensor<[3,4],f32>) -> !torch.vtensor<[],f32> {
  %none = torch.constant.none
  %false = torch.constant.bool false
  %int2 = torch.constant.int 2
  // expected-error @+1 {{unsupported op 'torch.aten.linalg_norm': matrix norms (ord=2 over 2 dims) are not supported}}
  %0 = torch.aten.linalg_norm %x, %int2, %none, %false, %none : !torch.vtensor<[3,4],f32>, !torch.int, !torch.none, !torch.bool, !torch.none -> !torch.vtensor<[],f32>
  return %0 : !torch.vtensor<[],f32>
}
