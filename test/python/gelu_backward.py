# RUN: %python %s | FileCheck %s
"""GELU's backward is one op, popnn's NonLinearityGrad: aten.gelu_backward lowers to
`ipu.gelu_grad` (exact GELU) or `ipu.gelu_tanh_grad` (the tanh approximation) of the
incoming gradient and the forward's input, not to torch's decomposition into erf, exp
and products."""

import torch

import poptorch


def run(f):
    print("\nTEST:", f.__name__)
    f()
    return f


def train(approximate: str) -> None:
    class Layer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(8, 8)

        def forward(self, x, y):
            out = torch.nn.functional.gelu(self.fc(x), approximate=approximate)
            return out, (out * y).sum()

    model = Layer().half()
    ipu = poptorch.trainingModel(model, poptorch.Options(),
                                 torch.optim.SGD(model.parameters(), lr=0.1))
    ipu(torch.randn(4, 8).half(), torch.randn(4, 8).half())
    for line in ipu._compiled.module_text.splitlines():
        if any(name in line for name in ('"ipu.gelu', '"ipu.erf', '"ipu.exp')):
            print(line.split(" loc(")[0].strip())


# CHECK-LABEL: TEST: exact
# CHECK:         "ipu.gelu"(%[[X:[0-9]+]]) : (tensor<4x8xf16>) -> tensor<4x8xf16>
# CHECK-NEXT:    "ipu.gelu_grad"(%{{[0-9]+}}, %[[X]]) {ipu.backward = true}
# CHECK-SAME:      : (tensor<4x8xf16>, tensor<4x8xf16>) -> tensor<4x8xf16>
# CHECK-NOT:     ipu.erf
# CHECK-NOT:     ipu.exp
@run
def exact():
    train("none")


# CHECK-LABEL: TEST: tanh
# CHECK:         "ipu.gelu_tanh"(%[[X:[0-9]+]]) : (tensor<4x8xf16>) -> tensor<4x8xf16>
# CHECK-NEXT:    "ipu.gelu_tanh_grad"(%{{[0-9]+}}, %[[X]]) {ipu.backward = true}
# CHECK-SAME:      : (tensor<4x8xf16>, tensor<4x8xf16>) -> tensor<4x8xf16>
@run
def tanh():
    train("tanh")
