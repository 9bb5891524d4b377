// RUN: ipu-opt %s --ipu-mark-overlapped-io --split-input-file --verify-diagnostics

// PopTorch's errors (poptorch/source/OverlappedIO.cpp): an input mark on a computed value.
func.func @not_an_input(%x: !torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
  %int1 = torch.constant.int 1
  %0 = torch.aten.neg %x : !torch.vtensor<[2],f32> -> !torch.vtensor<[2],f32>
  // expected-error @+1 {{poptorch.set_overlap_for_input applied on a node which is not a tensor input to the model.}}
  %1 = torch.operator "torch.poptorch.set_overlap_for_input"(%0, %int1) : (!torch.vtensor<[2],f32>, !torch.int) -> !torch.vtensor<[2],f32>
  return %1 : !torch.vtensor<[2],f32>
}

// -----

// An input read by another op besides its mark.
func.func @input_used_twice(%x: !torch.vtensor<[2],f32>) -> (!torch.vtensor<[2],f32>, !torch.vtensor<[2],f32>) {
  %int1 = torch.constant.int 1
  %0 = torch.aten.neg %x : !torch.vtensor<[2],f32> -> !torch.vtensor<[2],f32>
  // expected-error @+1 {{poptorch.set_overlap_for_input must be the only op applied to an input. This is not the case for input 0 to the model.}}
  %1 = torch.operator "torch.poptorch.set_overlap_for_input"(%x, %int1) : (!torch.vtensor<[2],f32>, !torch.int) -> !torch.vtensor<[2],f32>
  return %0, %1 : !torch.vtensor<[2],f32>, !torch.vtensor<[2],f32>
}

// -----

// An output returned twice (once through its mark).
func.func @returned_twice(%x: !torch.vtensor<[2],f32>) -> (!torch.vtensor<[2],f32>, !torch.vtensor<[2],f32>) {
  %int1 = torch.constant.int 1
  %0 = torch.aten.neg %x : !torch.vtensor<[2],f32> -> !torch.vtensor<[2],f32>
  // expected-error @+1 {{poptorch.set_overlap_for_output cannot be used with a tensor that is returned twice. Please check all returned tensors including those nested in tuples/lists.}}
  %1 = torch.operator "torch.poptorch.set_overlap_for_output"(%0, %int1) : (!torch.vtensor<[2],f32>, !torch.int) -> !torch.vtensor<[2],f32>
  return %0, %1 : !torch.vtensor<[2],f32>, !torch.vtensor<[2],f32>
}

// -----

// An output mark on a tensor the function does not return.
func.func @not_returned(%x: !torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
  %int1 = torch.constant.int 1
  // expected-error @+1 {{poptorch.set_overlap_for_output applied on a tensor the model does not return; mark the tensors forward returns, just before returning them}}
  %0 = torch.operator "torch.poptorch.set_overlap_for_output"(%x, %int1) : (!torch.vtensor<[2],f32>, !torch.int) -> !torch.vtensor<[2],f32>
  %1 = torch.aten.neg %0 : !torch.vtensor<[2],f32> -> !torch.vtensor<[2],f32>
  return %1 : !torch.vtensor<[2],f32>
}

// -----

// A mode that is not an OverlapMode.
func.func @bad_mode(%x: !torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
  %int3 = torch.constant.int 3
  // expected-error @+1 {{the overlap mode of torch.poptorch.set_overlap_for_input must be a constant 0, 1 or 2 (poptorch.OverlapMode)}}
  %0 = torch.operator "torch.poptorch.set_overlap_for_input"(%x, %int3) : (!torch.vtensor<[2],f32>, !torch.int) -> !torch.vtensor<[2],f32>
  return %0 : !torch.vtensor<[2],f32>
}
