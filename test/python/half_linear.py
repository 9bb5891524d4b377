# RUN: %python %s | FileCheck %s
"""fp16 matrix products stay fp16 from the frontend to the ipu dialect: nn.Linear of a
2-d input (aten.addmm), torch.baddbmm and the backward of a half training model lower to
an ipu.matmul of f16 operands with an f16 result, with no casts to f32 around it (torch's
own decompositions of addmm / baddbmm compute in f32; the capture keeps them whole)."""

import torch

import poptorch


def run(f):
    print("\nTEST:", f.__name__)
    f()
    return f


def products(model, ops=('"ipu.matmul"', '"ipu.cast"')) -> None:
    """The lowered module's `ops`, one a line, without their locations."""
    for line in model._compiled.module_text.splitlines():
        if any(name in line for name in ops):
            print(line.split(" loc(")[0].strip())


# CHECK-LABEL: TEST: linear_inference
# CHECK-NOT:     ipu.cast
# CHECK:         "ipu.matmul"(%arg2, {{.*}}: (tensor<2x8xf16>, tensor<8x4xf16>) -> tensor<2x4xf16>
# CHECK-NOT:     ipu.cast
@run
def linear_inference():
    model = poptorch.inferenceModel(torch.nn.Linear(8, 4).half())
    model(torch.randn(2, 8).half())
    products(model)


# CHECK-LABEL: TEST: baddbmm
# CHECK-NOT:     ipu.cast
# CHECK:         "ipu.matmul"(%arg1, %arg2) : (tensor<2x3x4xf16>, tensor<2x4x5xf16>) -> {{.*}}f16>
# CHECK-NOT:     ipu.cast
@run
def baddbmm():
    class Scaled(torch.nn.Module):
        def forward(self, bias, x, y):
            return torch.baddbmm(bias, x, y, beta=0.5, alpha=2)

    model = poptorch.inferenceModel(Scaled())
    model(torch.randn(2, 3, 5).half(), torch.randn(2, 3, 4).half(),
          torch.randn(2, 4, 5).half())
    products(model)


class Regressor(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x, y):
        out = self.fc(x)
        return out, torch.nn.functional.mse_loss(out, y)


# The forward's product, then the backward's weight gradient (the loss, mse_loss, computes
# in f32 as PyTorch's does; the products do not).
# CHECK-LABEL: TEST: linear_training
# CHECK:         "ipu.matmul"(%arg2, {{.*}}: (tensor<4x8xf16>, tensor<8x4xf16>) -> tensor<4x4xf16>
# CHECK-NEXT:    "ipu.matmul"({{.*}}) {ipu.backward = true} :
# CHECK-SAME:      (tensor<4x4xf16>, tensor<4x8xf16>) -> tensor<4x8xf16>
# CHECK-NOT:     ipu.matmul
@run
def linear_training():
    model = Regressor().half()
    training = poptorch.trainingModel(model,
                                      optimizer=poptorch.optim.SGD(model.parameters(), lr=0.1))
    training(torch.randn(4, 8).half(), torch.randn(4, 4).half())
    products(training, ('"ipu.matmul"',))
