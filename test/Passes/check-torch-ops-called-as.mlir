// RUN: not ipu-opt %s --ipu-check-torch-ops 2>&1 | FileCheck %s
// An op whose location records the torch call it came from (`torch.call` metadata, as the
// importer writes it) is reported by that name first, then by its torch-dialect name.

func.func @named(%x: !torch.vtensor<[3],f32>) -> !torch.vtensor<[3],f32> {
  // CHECK: model.py:3:0: error: unsupported op 'torch.lgamma' (torch.aten.lgamma): torch-mlir has no definition for it, so it cannot be lowered to the ipu dialect
  %0 = torch.operator "torch.aten.lgamma"(%x) : (!torch.vtensor<[3],f32>) -> !torch.vtensor<[3],f32> loc(fused<{"torch.call" = "torch.lgamma"}>["model.py":3:0])
  return %0 : !torch.vtensor<[3],f32>
}
