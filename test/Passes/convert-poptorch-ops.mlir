// RUN: ipu-opt %s --ipu-convert-poptorch-ops --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @print_and_nop
// CHECK:         %[[X:.*]] = torch_c.to_builtin_tensor %arg0
// CHECK-NEXT:    %[[P:.*]] = "ipu.print"(%[[X]]) {title = "summation"} : (tensor<2xf32>) -> tensor<2xf32>
// CHECK:         "ipu.nop"(%{{.*}}) : (tensor<2xf32>) -> tensor<2xf32>
func.func @print_and_nop(%x: !torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
  %title = torch.constant.str "summation"
  %0 = torch.operator "torch.poptorch.ipu_print_tensor"(%x, %title) : (!torch.vtensor<[2],f32>, !torch.str) -> !torch.vtensor<[2],f32>
  %1 = torch.operator "torch.poptorch.nop"(%0) : (!torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32>
  return %1 : !torch.vtensor<[2],f32>
}

// -----

// Other opaque operators are left for ipu-check-torch-ops to report.
// CHECK-LABEL: func.func @other_operator
// CHECK:         torch.operator "torch.aten.lgamma"
func.func @other_operator(%x: !torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
  %0 = torch.operator "torch.aten.lgamma"(%x) : (!torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32>
  return %0 : !torch.vtensor<[2],f32>
}
