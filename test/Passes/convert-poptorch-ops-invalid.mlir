// RUN: ipu-opt %s --ipu-convert-poptorch-ops --ipu-check-torch-ops --verify-diagnostics

// A print whose title is not a constant string cannot be lowered; the operator stays
// and is reported.
func.func @title_not_constant(%x: !torch.vtensor<[2],f32>, %t: !torch.str) -> !torch.vtensor<[2],f32> {
  // expected-error @+1 {{unsupported op 'torch.poptorch.ipu_print_tensor': a PopTorch op whose non-tensor arguments are not constants}}
  %0 = torch.operator "torch.poptorch.ipu_print_tensor"(%x, %t) : (!torch.vtensor<[2],f32>, !torch.str) -> !torch.vtensor<[2],f32>
  return %0 : !torch.vtensor<[2],f32>
}
