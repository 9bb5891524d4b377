// RUN: ipu-opt %s --ipu-check-torch-ops --verify-diagnostics

func.func @opaque(%x: !torch.vtensor<[3],f32>) -> !torch.vtensor<[3],f32> {
  // expected-error @+1 {{unsupported op 'torch.aten.lgamma': torch-mlir has no definition for it, so it cannot be lowered to the ipu dialect}}
  %0 = torch.operator "torch.aten.lgamma"(%x) : (!torch.vtensor<[3],f32>) -> !torch.vtensor<[3],f32>
  return %0 : !torch.vtensor<[3],f32>
}
