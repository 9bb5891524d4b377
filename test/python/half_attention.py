# RUN: %python %s | FileCheck %s
"""fp16 attention stays fp16 from the frontend to the ipu dialect, as PopART computes
it (matmuls and popnn's softmax, fp16 in and fp16 out): the scores, the max, the
exponentials and the products are f16 ops, only the softmax's sum is reduced into f32
(popnn's softmaxImpl reduces into FLOAT), in the forward and the backward. torch's
kernel of F.scaled_dot_product_attention and its softmax decompositions compute all of
it in f32 between casts (poptorch/_frontend/attention_decompositions.py)."""

import torch
import torch.nn.functional as F  # noqa: N812 - PyTorch's own alias

import poptorch


def run(f):
    print("\nTEST:", f.__name__)
    f()
    return f


class Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = torch.nn.Linear(32, 96)

    def forward(self, x, mask):
        q, k, v = (t.unflatten(-1, (4, 8)).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, -1))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return out, out.float().sum()


def scores(model) -> None:
    """The lowered module's ops on the (2 x 4 heads x 16 x 16) scores, no locations."""
    for line in model._compiled.module_text.splitlines():
        if '"ipu.' in line and ("2x4x16x16x" in line or "8x16x16x" in line):
            print(line.split(" loc(")[0].strip())


def inputs():
    torch.manual_seed(0)
    return torch.randn(2, 16, 32).half(), torch.rand(2, 1, 16, 16) > 0.2


# CHECK-LABEL: TEST: inference
# CHECK:         "ipu.matmul"({{[^)]*}})
# CHECK-SAME:      : (tensor<8x16x8xf16>, tensor<8x8x16xf16>) -> tensor<8x16x16xf16>
# CHECK:         %[[S:[0-9a-z]+]] = "ipu.select"({{[^)]*}})
# CHECK-SAME:      : (tensor<2x1x16x16xi1>, tensor<f16>, tensor<2x4x16x16xf16>)
# CHECK-NEXT:    %[[M:[0-9a-z]+]] = "ipu.reduce"(%[[S]])
# CHECK-SAME:      {dims = array<i64: 3>, keepdim = true, kind = "max"}
# CHECK-SAME:      (tensor<2x4x16x16xf16>) -> tensor<2x4x16x1xf16>
# CHECK-NEXT:    %[[D:[0-9a-z]+]] = "ipu.sub"(%[[S]], %[[M]])
# CHECK-SAME:      : (tensor<2x4x16x16xf16>, tensor<2x4x16x1xf16>) -> tensor<2x4x16x16xf16>
# CHECK-NEXT:    %[[E:[0-9a-z]+]] = "ipu.exp"(%[[D]])
# CHECK-SAME:      : (tensor<2x4x16x16xf16>) -> tensor<2x4x16x16xf16>
# CHECK-NEXT:    "ipu.reduce"(%[[E]]) {dims = array<i64: 3>, keepdim = true, kind = "sum"}
# CHECK-SAME:      (tensor<2x4x16x16xf16>) -> tensor<2x4x16x1xf32>
# CHECK-NEXT:    "ipu.mul"(%[[E]], {{[^)]*}})
# CHECK-SAME:      : (tensor<2x4x16x16xf16>, tensor<2x4x16x1xf16>) -> tensor<2x4x16x16xf16>
# CHECK:         "ipu.matmul"({{[^)]*}})
# CHECK-SAME:      : (tensor<8x16x16xf16>, tensor<8x16x8xf16>) -> tensor<8x16x8xf16>
# CHECK-NOT:     xf32>
@run
def inference():
    ipu = poptorch.inferenceModel(Attention().half().eval())
    ipu(*inputs())
    scores(ipu)


# CHECK-LABEL: TEST: training
# CHECK:         "ipu.reduce"({{.*}}) {dims = array<i64: 3>, keepdim = true, kind = "sum"}
# CHECK-SAME:      (tensor<2x4x16x16xf16>) -> tensor<2x4x16x1xf32>
# CHECK:         %[[G:[0-9a-z]+]] = "ipu.mul"({{[^)]*}}) {ipu.backward = true}
# CHECK-SAME:      : (tensor<2x4x16x16xf16>, tensor<2x4x16x16xf16>) -> tensor<2x4x16x16xf16>
# CHECK-NEXT:    "ipu.reduce"(%[[G]])
# CHECK-SAME:      {dims = array<i64: 3>, ipu.backward = true, keepdim = true, kind = "sum"}
# CHECK-SAME:      (tensor<2x4x16x16xf16>) -> tensor<2x4x16x1xf32>
# CHECK:         "ipu.sub"(%[[G]], {{[^)]*}}) {ipu.backward = true}
# CHECK-SAME:      : (tensor<2x4x16x16xf16>, tensor<2x4x16x16xf16>) -> tensor<2x4x16x16xf16>
# CHECK-NOT:     xf32>
@run
def training():
    model = Attention().half()
    ipu = poptorch.trainingModel(model, poptorch.Options(),
                                 torch.optim.SGD(model.parameters(), lr=0.1))
    ipu(*inputs())
    scores(ipu)
