// A two-layer MLP as the frontend imports it: torch ops whose locations carry the
// poptorch.Block each layer was written in (see notes/FRONTEND.md in the design docs).
// `ipu-opt examples/two_blocks.mlir --ipu-import-annotations` turns those into attributes.
#model_l3 = loc("model.py":3:0)
#model_l6 = loc("model.py":6:0)
module {
  func.func @forward(%x: !torch.vtensor<[2,8],f32>, %w1: !torch.vtensor<[8,16],f32>,
                     %b1: !torch.vtensor<[16],f32>, %w2: !torch.vtensor<[16,4],f32>)
      -> !torch.vtensor<[2,4],f32> {
    %int1 = torch.constant.int 1
    %0 = torch.aten.mm %x, %w1 : !torch.vtensor<[2,8],f32>, !torch.vtensor<[8,16],f32> -> !torch.vtensor<[2,16],f32> loc(fused<{ipu.block = "encoder"}>[#model_l3])
    %1 = torch.aten.add.Tensor %0, %b1, %int1 : !torch.vtensor<[2,16],f32>, !torch.vtensor<[16],f32>, !torch.int -> !torch.vtensor<[2,16],f32> loc(fused<{ipu.block = "encoder"}>[#model_l3])
    %2 = torch.aten.relu %1 : !torch.vtensor<[2,16],f32> -> !torch.vtensor<[2,16],f32> loc(fused<{ipu.block = "encoder"}>[#model_l3])
    %3 = torch.aten.mm %2, %w2 : !torch.vtensor<[2,16],f32>, !torch.vtensor<[16,4],f32> -> !torch.vtensor<[2,4],f32> loc(fused<{ipu.block = "head"}>[#model_l6])
    return %3 : !torch.vtensor<[2,4],f32>
  }
}
