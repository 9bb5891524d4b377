// RUN: ipu-opt %s --ipu-convert-poptorch-ops --ipu-check-torch-ops --split-input-file --verify-diagnostics

// A start of more than one element is declined with the reason.

func.func @dynamic_slice$start_shape(%x: !torch.vtensor<[8],f32>, %i: !torch.vtensor<[2],si32>) -> !torch.vtensor<[2],f32> {
  %int0 = torch.constant.int 0
  %int2 = torch.constant.int 2
  %int1 = torch.constant.int 1
  // expected-error @+1 {{unsupported op 'torch.poptorch.dynamic_slice': dynamic slice start of shape [2]: pass one element}}
  %0 = torch.operator "torch.poptorch.dynamic_slice"(%x, %int0, %i, %int2, %int1) : (!torch.vtensor<[8],f32>, !torch.int, !torch.vtensor<[2],si32>, !torch.int, !torch.int) -> !torch.vtensor<[2],f32>
  return %0 : !torch.vtensor<[2],f32>
}

// -----

func.func @dynamic_update$size(%x: !torch.vtensor<[8],f32>, %u: !torch.vtensor<[2],f32>, %i: !torch.vtensor<[1],si32>) -> !torch.vtensor<[8],f32> {
  %int0 = torch.constant.int 0
  %int3 = torch.constant.int 3
  // expected-error @+1 {{unsupported op 'torch.poptorch.dynamic_update': dynamic update of size 3 with a src of 2 elements along dim 0}}
  %0 = torch.operator "torch.poptorch.dynamic_update"(%x, %u, %int0, %i, %int3) : (!torch.vtensor<[8],f32>, !torch.vtensor<[2],f32>, !torch.int, !torch.vtensor<[1],si32>, !torch.int) -> !torch.vtensor<[8],f32>
  return %0 : !torch.vtensor<[8],f32>
}
