// RUN: ipu-opt %s --ipu-check-torch-ops | FileCheck %s

// Modelled torch ops pass through unchanged.
// CHECK-LABEL: func.func @known
// CHECK-NEXT:    %[[R:.*]] = torch.aten.relu %arg0
// CHECK-NEXT:    return %[[R]]
func.func @known(%x: !torch.vtensor<[3],f32>) -> !torch.vtensor<[3],f32> {
  %0 = torch.aten.relu %x : !torch.vtensor<[3],f32> -> !torch.vtensor<[3],f32>
  return %0 : !torch.vtensor<[3],f32>
}
