// RUN: ipu-opt %s --ipu-convert-poptorch-ops --canonicalize --split-input-file | FileCheck %s

// poptorch.ctc_beam_search_decoder (passes/conversion/ctc.py): one op, three results.

// CHECK-LABEL: func.func @ctc_beam_search_decoder
// CHECK:         %[[X:.*]] = torch_c.to_builtin_tensor %arg0 : !torch.vtensor<[9,3,10],f32> -> tensor<9x3x10xf32>
// CHECK-NEXT:    %[[N:.*]] = torch_c.to_builtin_tensor %arg1 : !torch.vtensor<[3],si32> -> tensor<3xi32>
// CHECK-NEXT:    %[[R:.*]]:3 = "ipu.ctc_beam_search_decoder"(%[[X]], %[[N]]) {beam_width = 100 : i64, blank = 0 : i64, top_paths = 2 : i64} : (tensor<9x3x10xf32>, tensor<3xi32>) -> (tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2x9xf32>)
// CHECK-DAG:     torch_c.from_builtin_tensor %[[R]]#0 : tensor<3x2xf32> -> !torch.vtensor<[3,2],f32>
// CHECK-DAG:     torch_c.from_builtin_tensor %[[R]]#1 : tensor<3x2xf32> -> !torch.vtensor<[3,2],f32>
// CHECK-DAG:     torch_c.from_builtin_tensor %[[R]]#2 : tensor<3x2x9xf32> -> !torch.vtensor<[3,2,9],f32>
func.func @ctc_beam_search_decoder(%x: !torch.vtensor<[9,3,10],f32>, %n: !torch.vtensor<[3],si32>) -> (!torch.vtensor<[3,2],f32>, !torch.vtensor<[3,2],f32>, !torch.vtensor<[3,2,9],f32>) {
  %int0 = torch.constant.int 0
  %int100 = torch.constant.int 100
  %int2 = torch.constant.int 2
  %0:3 = torch.operator "torch.poptorch.ctc_beam_search_decoder"(%x, %n, %int0, %int100, %int2) : (!torch.vtensor<[9,3,10],f32>, !torch.vtensor<[3],si32>, !torch.int, !torch.int, !torch.int) -> (!torch.vtensor<[3,2],f32>, !torch.vtensor<[3,2],f32>, !torch.vtensor<[3,2,9],f32>)
  return %0#0, %0#1, %0#2 : !torch.vtensor<[3,2],f32>, !torch.vtensor<[3,2],f32>, !torch.vtensor<[3,2,9],f32>
}
