// RUN: ipu-opt %s --ipu-convert-torch-to-ipu | FileCheck %s

// Every ipu op keeps the placement of the torch op it replaces (read from the location
// metadata poptorch.Block left), next to an op lowered earlier that kept its own.
// CHECK-LABEL: func.func @placed
// CHECK:         "ipu.nop"(%{{.*}}) {ipu.block = "0", ipu.ipu_id = 0 : i64}
// CHECK:         "ipu.permute"(%{{.*}}) {dims = array<i64: 1, 0>, ipu.backward = true, ipu.block = "1", ipu.ipu_id = 1 : i64}
// CHECK:         "ipu.matmul"(%{{.*}}, %{{.*}}) {ipu.backward = true, ipu.block = "1", ipu.ipu_id = 1 : i64}
func.func @placed(%x: !torch.vtensor<[2,3],f32>, %w: !torch.vtensor<[3,3],f32>) -> !torch.vtensor<[2,3],f32> {
  %0 = torch_c.to_builtin_tensor %x {ipu.block = "0", ipu.ipu_id = 0 : i64} : !torch.vtensor<[2,3],f32> -> tensor<2x3xf32> loc(#block0)
  %1 = "ipu.nop"(%0) {ipu.block = "0", ipu.ipu_id = 0 : i64} : (tensor<2x3xf32>) -> tensor<2x3xf32> loc(#block0)
  %2 = torch_c.from_builtin_tensor %1 {ipu.block = "0", ipu.ipu_id = 0 : i64} : tensor<2x3xf32> -> !torch.vtensor<[2,3],f32> loc(#block0)
  %int1 = torch.constant.int 1
  %int0 = torch.constant.int 0
  %perm = torch.prim.ListConstruct %int1, %int0 : (!torch.int, !torch.int) -> !torch.list<int>
  %3 = torch.aten.permute %w, %perm {ipu.backward = true, ipu.block = "1", ipu.ipu_id = 1 : i64} : !torch.vtensor<[3,3],f32>, !torch.list<int> -> !torch.vtensor<[3,3],f32> loc(#block1)
  %4 = torch.aten.mm %2, %3 {ipu.backward = true, ipu.block = "1", ipu.ipu_id = 1 : i64} : !torch.vtensor<[2,3],f32>, !torch.vtensor<[3,3],f32> -> !torch.vtensor<[2,3],f32> loc(#block1)
  return %4 : !torch.vtensor<[2,3],f32>
}

#model = loc("model.py":12:8)
#block0 = loc(fused<{ipu.block = "0", ipu.ipu_id = 0 : i64}>[#model])
#block1 = loc(fused<{ipu.backward = true, ipu.block = "1", ipu.ipu_id = 1 : i64}>[#model])
