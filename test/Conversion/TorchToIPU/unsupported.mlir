// RUN: ipu-opt %s --ipu-convert-torch-to-ipu --split-input-file --verify-diagnostics

// An op without a lowering stays and is reported at its location.
func.func @no_lowering(%x: !torch.vtensor<[4],si64>) -> !torch.vtensor<[?],si64> {
  %int0 = torch.constant.int 0
  %none = torch.constant.none
  // expected-error @+1 {{unsupported op 'torch.aten.bincount': no lowering to the ipu dialect}}
  %0 = torch.aten.bincount %x, %none, %int0 : !torch.vtensor<[4],si64>, !torch.none, !torch.int -> !torch.vtensor<[?],si64>
  return %0 : !torch.vtensor<[?],si64>
}

// -----

// A lowering that declines gives its reason.
func.func @declined(%x: !torch.vtensor<[4],f32>) -> !torch.vtensor<[4],f32> {
  %true = torch.constant.bool true
  %p = torch.constant.float 5.000000e-01
  // expected-error @+1 {{unsupported op 'torch.aten.dropout': dropout in training mode is not supported yet}}
  %0 = torch.aten.dropout %x, %p, %true : !torch.vtensor<[4],f32>, !torch.float, !torch.bool -> !torch.vtensor<[4],f32>
  return %0 : !torch.vtensor<[4],f32>
}

// -----

// Shapes must be known: a dynamic-rank tensor cannot be converted.
func.func @unknown_rank(%x: !torch.vtensor<*,f32>) -> !torch.vtensor<*,f32> {
  // expected-error @+1 {{unsupported op 'torch.aten.relu': expected a tensor with known rank and dtype, got !torch.vtensor<*,f32>}}
  %0 = torch.aten.relu %x : !torch.vtensor<*,f32> -> !torch.vtensor<*,f32>
  return %0 : !torch.vtensor<*,f32>
}
