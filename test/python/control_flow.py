# RUN: %python %s | FileCheck %s
"""poptorch.for_loop and poptorch.cond from the frontend to the ipu dialect: torch's
while_loop / cond HOPs imported as scf.for / scf.if whose regions call the body's
function once, then lowered with the body inlined into the region (once, whatever the
trip count)."""

import torch
from torch_mlir import ir

import poptorch
from poptorch._compiler import driver
from poptorch._frontend import capture
from poptorch.dialects import make_context


def run(f):
    print("\nTEST:", f.__name__)
    f()
    return f


def imported_and_lowered(model, *args):
    captured = capture.capture(model, args, {})
    context = make_context()
    with context, ir.Location.unknown():
        module = capture.import_to_mlir(captured.graph_module, context)
        print(module.operation.get_asm(large_elements_limit=4))
        driver.lower(module, context, None, {})
        print(module.operation.get_asm(large_elements_limit=4))


class Loop(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 4, bias=False)

    def forward(self, x):
        return poptorch.for_loop(1000, lambda a: torch.tanh(self.layer(a)), [x])[0]


# The import: the body is a private function, the condition (`counter < 1000`) became
# the loop's bounds; the loop carries the counter and x, and passes the weight to each
# call. After lowering, the body is inlined: one matmul, in the loop.
# CHECK-LABEL: TEST: for_loop
# CHECK:       func.func private @while_loop_body_graph_0(%{{.*}}: !torch.vtensor<[],si32>,
# CHECK-SAME:      %{{.*}}: !torch.vtensor<[2,4],f32>, %{{.*}}: !torch.vtensor<[4,4],f32>)
# CHECK-NOT:   func.func private @while_loop_cond_graph_0
# CHECK:       func.func @main(%[[W:.*]]: !torch.vtensor<[4,4],f32>,
# CHECK-SAME:      %[[X:.*]]: !torch.vtensor<[2,4],f32>)
# CHECK-DAG:     %[[LB:.*]] = arith.constant 0 : index
# CHECK-DAG:     %[[UB:.*]] = arith.constant 1000 : index
# CHECK-DAG:     %[[ST:.*]] = arith.constant 1 : index
# CHECK:         %[[R:.*]]:2 = scf.for %{{.*}} = %[[LB]] to %[[UB]] step %[[ST]]
# CHECK-SAME:      iter_args(%{{[^ ]+}} = %{{[^ ]+}}, %{{[^ ]+}} = %{{[^ ]+}})
# CHECK-SAME:      -> (tensor<i32>, tensor<2x4xf32>) {
# CHECK:           %[[OUT:.*]]:2 = func.call @while_loop_body_graph_0(%{{.*}}, %{{.*}}, %[[W]])
# CHECK:           scf.yield %{{.*}}, %{{.*}} : tensor<i32>, tensor<2x4xf32>
# CHECK-NEXT:    }
# CHECK:       func.func @main(%[[W2:.*]]: tensor<4x4xf32>, %[[X2:.*]]: tensor<2x4xf32>)
# CHECK-NOT:     ipu.matmul
# CHECK:         scf.for %{{.*}} = %{{.*}} to %c1000 step
# CHECK:           "ipu.matmul"(%{{.*}}, %{{.*}}) {ipu.name_scope = "layer"}
# CHECK:           "ipu.tanh"
# CHECK:           "ipu.add"(%{{.*}}, %{{.*}}) : (tensor<i32>, tensor<i32>) -> tensor<i32>
# CHECK:           scf.yield
# CHECK-NOT:     ipu.matmul
# CHECK:         return
@run
def for_loop():
    imported_and_lowered(Loop(), torch.randn(2, 4))


class Cond(torch.nn.Module):
    def forward(self, condition, x, y):
        return poptorch.cond(condition, lambda a: a * y, [x], lambda a, b: a - b, [x, y])[0]


# The import: scf.if on the one element of the condition, each branch calling its
# function with both branches' inputs (then_inps, else_inps) and the tensors the
# branches read from the caller (y). After lowering: one region per branch.
# CHECK-LABEL: TEST: cond
# CHECK:       func.func private @true_graph_0
# CHECK:       func.func private @false_graph_0
# CHECK:       func.func @main(%[[C:.*]]: !torch.vtensor<[1],i1>
# CHECK:         %[[V:.*]] = torch.aten.view %[[C]]
# CHECK:         %[[B:.*]] = torch_c.to_builtin_tensor %[[V]] : !torch.vtensor<[],i1> -> tensor<i1>
# CHECK:         %[[E:.*]] = tensor.extract %[[B]][] : tensor<i1>
# CHECK:         scf.if %[[E]] -> (tensor<2x4xf32>) {
# CHECK:           func.call @true_graph_0
# CHECK:         } else {
# CHECK:           func.call @false_graph_0
# CHECK:       func.func @main(%[[C2:.*]]: tensor<1xi1>, %[[X2:.*]]: tensor<2x4xf32>,
# CHECK-SAME:      %[[Y2:.*]]: tensor<2x4xf32>)
# CHECK:         %[[E2:.*]] = tensor.extract %{{.*}}[] : tensor<i1>
# CHECK-NEXT:    %[[R2:.*]] = scf.if %[[E2]] -> (tensor<2x4xf32>) {
# CHECK-NEXT:      %[[M:.*]] = "ipu.mul"(%[[X2]], %[[Y2]])
# CHECK-NEXT:      scf.yield %[[M]]
# CHECK-NEXT:    } else {
# CHECK-NEXT:      %[[S:.*]] = "ipu.sub"(%[[X2]], %[[Y2]])
# CHECK-NEXT:      scf.yield %[[S]]
# CHECK-NEXT:    }
# CHECK-NEXT:    return %[[R2]]
@run
def cond():
    imported_and_lowered(Cond(), torch.tensor([True]), torch.randn(2, 4), torch.randn(2, 4))
