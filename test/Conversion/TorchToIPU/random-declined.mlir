// RUN: ipu-opt %s --ipu-convert-poptorch-ops --ipu-check-torch-ops --split-input-file --verify-diagnostics

// torch.normal with a negative standard deviation is refused, as torch refuses it.

func.func @normal$negative_std() -> !torch.vtensor<[5],f32> {
  %one = torch.constant.float 1.000000e+00
  %minus = torch.constant.float -3.000000e+00
  %int5 = torch.constant.int 5
  %none = torch.constant.none
  %size = torch.prim.ListConstruct %int5 : (!torch.int) -> !torch.list<int>
  // expected-error @+1 {{unsupported op 'torch.aten.normal.float_float': normal expects std >= 0.0, got std=-3.0}}
  %0 = torch.operator "torch.aten.normal.float_float"(%one, %minus, %size, %none, %none, %none, %none, %none) : (!torch.float, !torch.float, !torch.list<int>, !torch.none, !torch.none, !torch.none, !torch.none, !torch.none) -> !torch.vtensor<[5],f32>
  return %0 : !torch.vtensor<[5],f32>
}
