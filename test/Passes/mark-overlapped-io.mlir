// RUN: ipu-opt %s --ipu-mark-overlapped-io --split-input-file | FileCheck %s

// set_overlap_for_input on an argument and set_overlap_for_output on a returned tensor
// become ipu.overlap attributes of the argument and the result; the marks go.
// CHECK-LABEL: func.func @main(
// CHECK-SAME:    %arg0: !torch.vtensor<[4,8],f32> {ipu.overlap = "overlap_accumulation_loop"},
// CHECK-SAME:    %arg1: !torch.vtensor<[4,8],f32>)
// CHECK-SAME:    -> (!torch.vtensor<[4,8],f32> {ipu.overlap = "overlap_device_iteration_loop"})
// CHECK-NEXT:    %[[ONE:.*]] = torch.constant.int 1
// CHECK-NEXT:    %[[ADD:.*]] = torch.aten.add.Tensor %arg0, %arg1, %[[ONE]] :
// CHECK-NOT:     torch.poptorch
// CHECK:         return %[[ADD]]
func.func @main(%x: !torch.vtensor<[4,8],f32>, %y: !torch.vtensor<[4,8],f32>) -> !torch.vtensor<[4,8],f32> {
  %int1 = torch.constant.int 1
  %int2 = torch.constant.int 2
  %0 = torch.operator "torch.poptorch.set_overlap_for_input"(%x, %int1) : (!torch.vtensor<[4,8],f32>, !torch.int) -> !torch.vtensor<[4,8],f32>
  %1 = torch.aten.add.Tensor %0, %y, %int1 : !torch.vtensor<[4,8],f32>, !torch.vtensor<[4,8],f32>, !torch.int -> !torch.vtensor<[4,8],f32>
  %2 = torch.operator "torch.poptorch.set_overlap_for_output"(%1, %int2) : (!torch.vtensor<[4,8],f32>, !torch.int) -> !torch.vtensor<[4,8],f32>
  return %2 : !torch.vtensor<[4,8],f32>
}

// -----

// NoOverlap (0) leaves no attribute; the second result is marked, the first not; an
// output read after its mark (PopTorch's MarkedOutputReuseAfterModel) is allowed.
// CHECK-LABEL: func.func @no_overlap_and_second_result(
// CHECK-SAME:    %arg0: !torch.vtensor<[2],f32>)
// CHECK-SAME:    -> (!torch.vtensor<[2],f32>, !torch.vtensor<[2],f32> {ipu.overlap = "overlap_accumulation_loop"})
// CHECK-NEXT:    %[[Z:.*]] = torch.aten.neg %arg0
// CHECK-NEXT:    %[[W:.*]] = torch.aten.neg %[[Z]]
// CHECK-NEXT:    return %[[W]], %[[Z]]
func.func @no_overlap_and_second_result(%x: !torch.vtensor<[2],f32>) -> (!torch.vtensor<[2],f32>, !torch.vtensor<[2],f32>) {
  %int0 = torch.constant.int 0
  %int1 = torch.constant.int 1
  %0 = torch.operator "torch.poptorch.set_overlap_for_input"(%x, %int0) : (!torch.vtensor<[2],f32>, !torch.int) -> !torch.vtensor<[2],f32>
  %1 = torch.aten.neg %0 : !torch.vtensor<[2],f32> -> !torch.vtensor<[2],f32>
  %2 = torch.operator "torch.poptorch.set_overlap_for_output"(%1, %int1) : (!torch.vtensor<[2],f32>, !torch.int) -> !torch.vtensor<[2],f32>
  %3 = torch.aten.neg %2 : !torch.vtensor<[2],f32> -> !torch.vtensor<[2],f32>
  return %3, %2 : !torch.vtensor<[2],f32>, !torch.vtensor<[2],f32>
}
