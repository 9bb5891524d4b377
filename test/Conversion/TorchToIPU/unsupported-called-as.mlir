// RUN: not ipu-opt %s --ipu-convert-torch-to-ipu 2>&1 | FileCheck %s
// An op nothing lowers is reported by the torch call the user wrote when its location
// records it (`torch.call` metadata), then by its torch-dialect name.

func.func @named(%x: !torch.vtensor<[3],si64>) -> !torch.vtensor<[?],si64> {
  %none = torch.constant.none
  %int0 = torch.constant.int 0
  // CHECK: model.py:7:0: error: unsupported op 'torch.bincount' (torch.aten.bincount): no lowering to the ipu dialect
  %0 = torch.aten.bincount %x, %none, %int0 : !torch.vtensor<[3],si64>, !torch.none, !torch.int -> !torch.vtensor<[?],si64> loc(fused<{"torch.call" = "torch.bincount"}>["model.py":7:0])
  return %0 : !torch.vtensor<[?],si64>
}
