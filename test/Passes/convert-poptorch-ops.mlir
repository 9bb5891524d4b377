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

// -----

// identity_loss reduces with its reduction; "none" (and a 0-d loss) is the tensor itself.
// CHECK-LABEL: func.func @identity_loss
// CHECK:         "ipu.reduce"(%{{.*}}) {dims = array<i64: 0, 1>, keepdim = false, kind = "mean"} : (tensor<2x3xf32>) -> tensor<f32>
// CHECK-NOT:     "ipu.reduce"
func.func @identity_loss(%x: !torch.vtensor<[2,3],f32>) -> (!torch.vtensor<[],f32>, !torch.vtensor<[2,3],f32>) {
  %mean = torch.constant.str "mean"
  %none = torch.constant.str "none"
  %0 = torch.operator "torch.poptorch.identity_loss"(%x, %mean) : (!torch.vtensor<[2,3],f32>, !torch.str) -> !torch.vtensor<[],f32>
  %1 = torch.operator "torch.poptorch.identity_loss"(%x, %none) : (!torch.vtensor<[2,3],f32>, !torch.str) -> !torch.vtensor<[2,3],f32>
  return %0, %1 : !torch.vtensor<[],f32>, !torch.vtensor<[2,3],f32>
}

// -----

// poptorch.recomputationCheckpoint: an ipu.nop tagged as a checkpoint for ipu-recompute.
// CHECK-LABEL: func.func @checkpoint
// CHECK:         "ipu.nop"(%{{.*}}) {ipu.checkpoint} : (tensor<2xf32>) -> tensor<2xf32>
func.func @checkpoint(%x: !torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32> {
  %0 = torch.operator "torch.poptorch.recomputation_checkpoint"(%x) : (!torch.vtensor<[2],f32>) -> !torch.vtensor<[2],f32>
  return %0 : !torch.vtensor<[2],f32>
}
