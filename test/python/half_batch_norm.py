# RUN: %python %s | FileCheck %s
"""fp16 batch norm stays fp16 from the frontend to the ipu dialect, as popnn runs it:
its statistics are reduced from the halves into f32 (`ipu.reduce` with an f32 result,
no cast of the activations), the whitening, scale and shift are f16 ops, and so is the
backward (torch's own decompositions compute all of it in f32 between casts;
poptorch/_frontend/norm_decompositions.py). PopTorch's default (enableStableNorm off)
takes the variance in one pass, popnn's SQUARE_ADD of the halves into f32."""

import torch

import poptorch


def run(f):
    print("\nTEST:", f.__name__)
    f()
    return f


class Norm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gain = torch.nn.Parameter(torch.ones(4, 1, 1))
        self.bn = torch.nn.BatchNorm2d(4)

    def forward(self, x, y):
        out = self.bn(x * self.gain)  # a computed input: the backward needs its gradient
        return out, (out * y).sum()


def activations(model) -> None:
    """The lowered module's ops on whole (2x4x3x3) activations, without locations."""
    for line in model._compiled.module_text.splitlines():
        if '"ipu.' in line and "2x4x3x3x" in line:
            print(line.split(" loc(")[0].strip())


def train(options: poptorch.Options) -> None:
    torch.manual_seed(0)
    model = Norm().half()
    ipu = poptorch.trainingModel(model, options,
                                 torch.optim.SGD(model.parameters(), lr=0.1))
    ipu(torch.randn(2, 4, 3, 3).half(), torch.randn(2, 4, 3, 3).half())
    activations(ipu)


# CHECK-LABEL: TEST: training
# CHECK:         %[[X:[0-9a-z]+]] = "ipu.mul"(%arg6, %arg0)
# CHECK-SAME:      : (tensor<2x4x3x3xf16>, tensor<4x1x1xf16>) -> tensor<2x4x3x3xf16>
# CHECK-NEXT:    "ipu.reduce"(%[[X]]) {dims = array<i64: 0, 2, 3>, keepdim = true, kind = "sum"}
# CHECK-SAME:      (tensor<2x4x3x3xf16>) -> tensor<1x4x1x1xf32>
# CHECK-NEXT:    "ipu.sub"(%[[X]], {{[^)]*}})
# CHECK-SAME:      : (tensor<2x4x3x3xf16>, tensor<1x4x1x1xf16>) -> tensor<2x4x3x3xf16>
# CHECK-NEXT:    "ipu.reduce"(%[[X]])
# CHECK-SAME:      {dims = array<i64: 0, 2, 3>, keepdim = true, kind = "square_sum"}
# CHECK-SAME:      (tensor<2x4x3x3xf16>) -> tensor<1x4x1x1xf32>
# CHECK-NEXT:    "ipu.mul"({{[^)]*}})
# CHECK-SAME:      : (tensor<2x4x3x3xf16>, tensor<1x4x1x1xf16>) -> tensor<2x4x3x3xf16>
# CHECK-NEXT:    "ipu.mul"({{.*}}) : (tensor<2x4x3x3xf16>, tensor<4x1x1xf16>) -> tensor<2x4x3x3xf16>
# CHECK-NEXT:    "ipu.add"({{.*}}) : (tensor<2x4x3x3xf16>, tensor<4x1x1xf16>) -> tensor<2x4x3x3xf16>
# The backward: x_hat in f16, the gradient's sums into f32, the input gradient in f16.
# CHECK:         %[[XHAT:[0-9a-z]+]] = "ipu.mul"{{.*}}backward{{.*}}tensor<4x1x1xf16>) -> tensor<2
# CHECK-NEXT:    "ipu.reduce"(%[[DY:[0-9a-z]+]])
# CHECK-SAME:      {dims = array<i64: 0, 2, 3>, ipu.backward = true, keepdim = true, kind = "sum"}
# CHECK-SAME:      (tensor<2x4x3x3xf16>) -> tensor<1x4x1x1xf32>
# CHECK-NEXT:    "ipu.mul"(%[[DY]], %[[XHAT]]) {ipu.backward = true} : {{.*}} -> tensor<2x4x3x3xf16>
# CHECK-NEXT:    "ipu.reduce"({{[^)]*}})
# CHECK-SAME:      {dims = array<i64: 0, 2, 3>, ipu.backward = true, keepdim = true, kind = "sum"}
# CHECK-SAME:      (tensor<2x4x3x3xf16>) -> tensor<1x4x1x1xf32>
# CHECK-NEXT:    "ipu.mul"(%[[XHAT]], {{[^)]*}}) {ipu.backward = true}
# CHECK-SAME:      : (tensor<2x4x3x3xf16>, tensor<1x4x1x1xf16>) -> tensor<2x4x3x3xf16>
# CHECK-NEXT:    "ipu.sub"(%[[DY]], {{.*}}) {ipu.backward = true} : {{.*}} -> tensor<2x4x3x3xf16>
# CHECK-NEXT:    "ipu.sub"({{[^)]*}}) {ipu.backward = true}
# CHECK-SAME:      : (tensor<2x4x3x3xf16>, tensor<1x4x1x1xf16>) -> tensor<2x4x3x3xf16>
# CHECK-NEXT:    "ipu.mul"({{[^)]*}}) {ipu.backward = true}
# CHECK-SAME:      : (tensor<2x4x3x3xf16>, tensor<4x1x1xf16>) -> tensor<2x4x3x3xf16>
# CHECK-NOT:     ipu.cast
@run
def training():
    train(poptorch.Options())


# enableStableNorm(True): the variance about the mean, sum((x - mean)^2), its squares in f16.
# CHECK-LABEL: TEST: stable
# CHECK:         %[[D:[0-9a-z]+]] = "ipu.sub"({{[^)]*}})
# CHECK-SAME:      : (tensor<2x4x3x3xf16>, tensor<1x4x1x1xf16>) -> tensor<2x4x3x3xf16>
# CHECK-NEXT:    "ipu.mul"(%[[D]], %[[D]])
# CHECK-SAME:      : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) -> tensor<2x4x3x3xf16>
# CHECK-NEXT:    "ipu.reduce"({{[^)]*}}) {dims = array<i64: 0, 2, 3>, keepdim = true, kind = "sum"}
# CHECK-SAME:      (tensor<2x4x3x3xf16>) -> tensor<1x4x1x1xf32>
@run
def stable():
    train(poptorch.Options().enableStableNorm(True))


# Inference: the running statistics, cast to f16 per channel; the activations in f16.
# CHECK-LABEL: TEST: inference
# CHECK-NOT:     ipu.cast
# CHECK:         "ipu.sub"({{[^)]*}}) {ipu.name_scope = "bn"}
# CHECK-SAME:      : (tensor<2x4x3x3xf16>, tensor<4x1x1xf16>) -> tensor<2x4x3x3xf16>
# CHECK-NEXT:    "ipu.mul"({{[^)]*}}) {ipu.name_scope = "bn"}
# CHECK-SAME:      : (tensor<2x4x3x3xf16>, tensor<4x1x1xf16>) -> tensor<2x4x3x3xf16>
@run
def inference():
    model = poptorch.inferenceModel(Norm().half().eval())
    model(torch.randn(2, 4, 3, 3).half(), torch.randn(2, 4, 3, 3).half())
    activations(model)
