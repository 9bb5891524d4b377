// RUN: ipu-opt %s --ipu-convert-poptorch-ops --ipu-check-torch-ops --split-input-file --verify-diagnostics

// A factor that does not divide the serialised dimension is declined with the reason.

func.func @serialized_matmul$factor(%a: !torch.vtensor<[3,4],f32>, %b: !torch.vtensor<[4,6],f32>) -> !torch.vtensor<[3,6],f32> {
  %mode = torch.constant.str "input_channels"
  %int2 = torch.constant.int 2
  %false = torch.constant.bool false
  // expected-error @+1 {{unsupported op 'torch.poptorch.serialized_matmul': serialisation factor 2 does not divide the input_channels dimension (3)}}
  %0 = torch.operator "torch.poptorch.serialized_matmul"(%a, %b, %mode, %int2, %false) : (!torch.vtensor<[3,4],f32>, !torch.vtensor<[4,6],f32>, !torch.str, !torch.int, !torch.bool) -> !torch.vtensor<[3,6],f32>
  return %0 : !torch.vtensor<[3,6],f32>
}
