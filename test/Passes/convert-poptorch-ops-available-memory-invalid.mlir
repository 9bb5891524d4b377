// RUN: ipu-opt %s --ipu-convert-poptorch-ops --split-input-file --verify-diagnostics

// A proportion outside [0, 1] (the Python API checks it too; IR written by hand may not).
func.func @out_of_range(%a: !torch.vtensor<[2,3],f32>, %b: !torch.vtensor<[3,4],f32>) -> !torch.vtensor<[2,4],f32> {
  %0 = torch.aten.mm %a, %b : !torch.vtensor<[2,3],f32>, !torch.vtensor<[3,4],f32> -> !torch.vtensor<[2,4],f32>
  %p = torch.constant.float 1.500000e+00
  // expected-error @+1 {{available memory proportion 1.5 is not between 0.0 and 1.0}}
  %1 = torch.operator "torch.poptorch.set_available_memory"(%0, %p) : (!torch.vtensor<[2,4],f32>, !torch.float) -> !torch.vtensor<[2,4],f32>
  return %1 : !torch.vtensor<[2,4],f32>
}

// -----

// The proportion must be a constant: the cost model reads it at compile time.
func.func @not_constant(%a: !torch.vtensor<[2,4],f32>, %p: !torch.float) -> !torch.vtensor<[2,4],f32> {
  // expected-error @+1 {{set_available_memory needs a constant proportion}}
  %1 = torch.operator "torch.poptorch.set_available_memory"(%a, %p) : (!torch.vtensor<[2,4],f32>, !torch.float) -> !torch.vtensor<[2,4],f32>
  return %1 : !torch.vtensor<[2,4],f32>
}
