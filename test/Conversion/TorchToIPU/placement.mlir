// RUN: ipu-opt %s --ipu-convert-torch-to-ipu --canonicalize --split-input-file | FileCheck %s

// The ipu ops a lowering creates take the placement its torch op's location names, so
// that a module whose PopTorch ops were lowered (and placed) earlier is never half
// placed after the conversion.

// CHECK-LABEL: func.func @placed
// CHECK:         %[[T:.*]] = "ipu.tanh"(%{{.*}}) {ipu.ipu_id = 1 : i64} : (tensor<2xf32>) -> tensor<2xf32>
// CHECK-NEXT:    "ipu.nop"(%[[T]]) {ipu.ipu_id = 1 : i64} : (tensor<2xf32>) -> tensor<2xf32>
func.func @placed(%x: !torch.vtensor<[2],f32>) -> tensor<2xf32> {
  %0 = torch.aten.tanh %x : !torch.vtensor<[2],f32> -> !torch.vtensor<[2],f32> loc(#placed)
  %1 = torch_c.to_builtin_tensor %0 : !torch.vtensor<[2],f32> -> tensor<2xf32>
  %2 = "ipu.nop"(%1) {ipu.ipu_id = 1 : i64} : (tensor<2xf32>) -> tensor<2xf32>
  return %2 : tensor<2xf32>
}
#placed = loc(fused<{ipu.ipu_id = 1 : i64}>["model.py":3:4])
