# RUN: %python %s | FileCheck %s
"""Building, verifying and printing ipu ops from Python with the `dialects.ext` op classes.

Builders take operands, attributes and result types as positional arguments in the order the
class declares its fields, then `loc=` / `ip=` keywords. Attributes must be MLIR attributes
(a Python int or str is a TypeError), results are given as types.
"""

import inspect

from torch_mlir import ir
from torch_mlir.dialects import func

from poptorch.dialects import (
    elementwise,
    linear,
    make_context,
    replica_group,
    stage_attr,
    structure,
)


def run(f):
    print("\nTEST:", f.__name__)
    with make_context(), ir.Location.unknown():
        f()
    return f


def i64(value: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)


def tensor(*shape: int) -> ir.RankedTensorType:
    return ir.RankedTensorType.get(list(shape), ir.F32Type.get())


DYN = ir.ShapedType.get_dynamic_size()


# CHECK-LABEL: TEST: builder_signatures
@run
def builder_signatures():
    # CHECK-NEXT: CopyOp(input, src_ipu, dst_ipu, output, *, loc=None, ip=None)
    # CHECK-NEXT: HostLoadOp(stream, output, *, loc=None, ip=None)
    # CHECK-NEXT: HostStoreOp(input, stream, *, loc=None, ip=None)
    # CHECK-NEXT: AllReduceOp(input, reduction, group, output, *, loc=None, ip=None)
    # CHECK-NEXT: NegOp(input, output, *, loc=None, ip=None)
    # CHECK-NEXT: AddOp(lhs, rhs, output, *, loc=None, ip=None)
    # CHECK-NEXT: MatMulOp(lhs, rhs, output, *, loc=None, ip=None)
    ops = [structure.CopyOp, structure.HostLoadOp,
           structure.HostStoreOp, structure.AllReduceOp, elementwise.UNARY_OPS["neg"],
           elementwise.BINARY_OPS["add"], linear.MatMulOp]
    for op in ops:
        print(f"{op.__name__}{inspect.signature(op)}")


# A two-stage pipeline: stage functions tagged #ipu.stage<stage, ipu> (host input on IPU 0;
# a copy to IPU 1, a replica all-reduce and the host output on IPU 1), called from `pipeline`.
# CHECK-LABEL: TEST: structure_ops
@run
def structure_ops():
    t = tensor(8, 4)
    module = ir.Module.create()
    with ir.InsertionPoint(module.body):

        @func.FuncOp.from_py_func()
        def stage0():
            return structure.HostLoadOp(ir.StringAttr.get("input0"), t).result

        @func.FuncOp.from_py_func(t)
        def stage1(x):
            y = structure.CopyOp(x, i64(0), i64(1), t)
            g = structure.AllReduceOp(y, ir.StringAttr.get("mean"),
                                      replica_group("orthogonal", 4), t)
            structure.HostStoreOp(g, ir.StringAttr.get("output0"))

        @func.FuncOp.from_py_func()
        def pipeline():
            x = func.CallOp(stage0.func_op, [])
            x.attributes["ipu.stage"] = stage_attr(0, 0)
            func.CallOp(stage1.func_op, [x.result]).attributes["ipu.stage"] = stage_attr(1, 1)

        stage0.func_op.attributes["ipu.stage"] = stage_attr(0, 0)
        stage1.func_op.attributes["ipu.stage"] = stage_attr(1, 1)

    # CHECK-NEXT: verified: True
    print("verified:", module.operation.verify())
    # CHECK:      func.func @stage0() -> tensor<8x4xf32> attributes
    # CHECK-SAME:     {ipu.stage = #ipu.stage<0 : i64, 0 : i64>} {
    # CHECK-NEXT:   %[[X:.*]] = "ipu.host_load"() {stream = "input0"} : () -> tensor<8x4xf32>
    # CHECK-NEXT:   return %[[X]] : tensor<8x4xf32>
    # CHECK:      func.func @stage1(%[[A:.*]]: tensor<8x4xf32>) attributes
    # CHECK-SAME:     {ipu.stage = #ipu.stage<1 : i64, 1 : i64>} {
    # CHECK-NEXT:   %[[Y:.*]] = "ipu.copy"(%[[A]]) {dst_ipu = 1 : i64, src_ipu = 0 : i64}
    # CHECK-SAME:       : (tensor<8x4xf32>) -> tensor<8x4xf32>
    # CHECK-NEXT:   %[[G:.*]] = "ipu.all_reduce"(%[[Y]])
    # CHECK-SAME:       {group = #ipu.replica_group<"orthogonal", 4 : i64>, reduction = "mean"}
    # CHECK-SAME:       : (tensor<8x4xf32>) -> tensor<8x4xf32>
    # CHECK-NEXT:   "ipu.host_store"(%[[G]]) {stream = "output0"} : (tensor<8x4xf32>) -> ()
    # CHECK-NEXT:   return
    # CHECK:      func.func @pipeline() {
    # CHECK-NEXT:   %[[S:.*]] = call @stage0() {ipu.stage = #ipu.stage<0 : i64, 0 : i64>}
    # CHECK-NEXT:   call @stage1(%[[S]]) {ipu.stage = #ipu.stage<1 : i64, 1 : i64>}
    # CHECK-NEXT:   return
    print(module)


# CHECK-LABEL: TEST: replica_groups
@run
def replica_groups():
    # CHECK-NEXT: #ipu.replica_group<"all", 0 : i64> all 0
    # CHECK-NEXT: #ipu.replica_group<"consecutive", 2 : i64> consecutive 2
    # CHECK-NEXT: #ipu.replica_group<"orthogonal", 4 : i64> orthogonal 4
    # CHECK-NEXT: #ipu.replica_group<"no_grouping", 0 : i64> no_grouping 0
    for kind, size in [("all", 0), ("consecutive", 2), ("orthogonal", 4), ("no_grouping", 0)]:
        group = replica_group(kind, size)
        print(group, group.kind.maybe_downcast().value, group.size.maybe_downcast().value)


# A chain through a selection of the unary and binary elementwise ops; binary ops
# broadcast 3x1 with 4 (the ops' IR round trip is test/Dialect/IPU/elementwise.mlir).
# CHECK-LABEL: TEST: elementwise_ops
@run
def elementwise_ops():
    module = ir.Module.create()
    with ir.InsertionPoint(module.body):

        @func.FuncOp.from_py_func(tensor(3, 1), tensor(4))
        def elementwise_ops(x, y):
            for name in ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu",
                         "gelu"]:
                x = elementwise.UNARY_OPS[name](x, x.type).result
            for binary in map(elementwise.BINARY_OPS.get,
                              ["add", "sub", "mul", "div", "pow", "max", "min"]):
                x = binary(x, y, tensor(3, 4)).result
                y = x
            return x

    # CHECK-NEXT: verified: True
    print("verified:", module.operation.verify())
    # CHECK:      func.func @elementwise_ops(%[[X:.*]]: tensor<3x1xf32>, %[[Y:.*]]: tensor<4xf32>)
    # CHECK-SAME:     -> tensor<3x4xf32> {
    # CHECK-NEXT:   %[[NEG:.*]] = "ipu.neg"(%[[X]]) : (tensor<3x1xf32>) -> tensor<3x1xf32>
    # CHECK-NEXT:   %[[ABS:.*]] = "ipu.abs"(%[[NEG]]) : (tensor<3x1xf32>) -> tensor<3x1xf32>
    # CHECK-NEXT:   %[[EXP:.*]] = "ipu.exp"(%[[ABS]]) : (tensor<3x1xf32>) -> tensor<3x1xf32>
    # CHECK-NEXT:   %[[LOG:.*]] = "ipu.log"(%[[EXP]]) : (tensor<3x1xf32>) -> tensor<3x1xf32>
    # CHECK-NEXT:   %[[SQRT:.*]] = "ipu.sqrt"(%[[LOG]]) : (tensor<3x1xf32>) -> tensor<3x1xf32>
    # CHECK-NEXT:   %[[RSQRT:.*]] = "ipu.rsqrt"(%[[SQRT]]) : (tensor<3x1xf32>) -> tensor<3x1xf32>
    # CHECK-NEXT:   %[[TANH:.*]] = "ipu.tanh"(%[[RSQRT]]) : (tensor<3x1xf32>) -> tensor<3x1xf32>
    # CHECK-NEXT:   %[[SIG:.*]] = "ipu.sigmoid"(%[[TANH]]) : (tensor<3x1xf32>) -> tensor<3x1xf32>
    # CHECK-NEXT:   %[[RELU:.*]] = "ipu.relu"(%[[SIG]]) : (tensor<3x1xf32>) -> tensor<3x1xf32>
    # CHECK-NEXT:   %[[GELU:.*]] = "ipu.gelu"(%[[RELU]]) : (tensor<3x1xf32>) -> tensor<3x1xf32>
    # CHECK-NEXT:   %[[ADD:.*]] = "ipu.add"(%[[GELU]], %[[Y]])
    # CHECK-SAME:       : (tensor<3x1xf32>, tensor<4xf32>) -> tensor<3x4xf32>
    # CHECK-NEXT:   %[[SUB:.*]] = "ipu.sub"(%[[ADD]], %[[ADD]])
    # CHECK-SAME:       : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
    # CHECK-NEXT:   %[[MUL:.*]] = "ipu.mul"(%[[SUB]], %[[SUB]])
    # CHECK-SAME:       : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
    # CHECK-NEXT:   %[[DIV:.*]] = "ipu.div"(%[[MUL]], %[[MUL]])
    # CHECK-SAME:       : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
    # CHECK-NEXT:   %[[POW:.*]] = "ipu.pow"(%[[DIV]], %[[DIV]])
    # CHECK-SAME:       : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
    # CHECK-NEXT:   %[[MAX:.*]] = "ipu.max"(%[[POW]], %[[POW]])
    # CHECK-SAME:       : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
    # CHECK-NEXT:   %[[MIN:.*]] = "ipu.min"(%[[MAX]], %[[MAX]])
    # CHECK-SAME:       : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
    # CHECK-NEXT:   return %[[MIN]] : tensor<3x4xf32>
    print(module)


# CHECK-LABEL: TEST: matmul
@run
def matmul():
    module = ir.Module.create()
    with ir.InsertionPoint(module.body):

        @func.FuncOp.from_py_func(tensor(2, 3), tensor(7, 1, 3, 4), tensor(5, 4, DYN))
        def matmul(a, b, c):
            ab = linear.MatMulOp(a, b, tensor(7, 1, 2, 4)).result
            return linear.MatMulOp(ab, c, tensor(7, 5, 2, DYN)).result

    # CHECK-NEXT: verified: True
    print("verified:", module.operation.verify())
    # CHECK:      func.func @matmul(
    # CHECK-SAME:     %[[A:.*]]: tensor<2x3xf32>, %[[B:.*]]: tensor<7x1x3x4xf32>,
    # CHECK-SAME:     %[[C:.*]]: tensor<5x4x?xf32>) -> tensor<7x5x2x?xf32> {
    # CHECK-NEXT:   %[[AB:.*]] = "ipu.matmul"(%[[A]], %[[B]])
    # CHECK-SAME:       : (tensor<2x3xf32>, tensor<7x1x3x4xf32>) -> tensor<7x1x2x4xf32>
    # CHECK-NEXT:   %[[ABC:.*]] = "ipu.matmul"(%[[AB]], %[[C]])
    # CHECK-SAME:       : (tensor<7x1x2x4xf32>, tensor<5x4x?xf32>) -> tensor<7x5x2x?xf32>
    # CHECK-NEXT:   return %[[ABC]] : tensor<7x5x2x?xf32>
    print(module)


# Ops parsed from text come back as the op classes, with named accessors.
# CHECK-LABEL: TEST: parsed_ops
@run
def parsed_ops():
    module = ir.Module.parse(
        'func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {\n'
        '  %0 = "ipu.copy"(%x) {src_ipu = 0 : i64, dst_ipu = 2 : i64}'
        ' : (tensor<4xf32>) -> tensor<4xf32>\n'
        '  return %0 : tensor<4xf32>\n'
        '}'
    )
    copy = module.body.operations[0].regions[0].blocks[0].operations[0]
    # CHECK-NEXT: CopyOp ipu.copy 0 -> 2 tensor<4xf32>
    print(type(copy).__name__, copy.OPERATION_NAME, copy.src_ipu.value, "->",
          copy.dst_ipu.value, copy.output.type)


# A verifier failure on a built op is an MLIR diagnostic at the op's location, raised by
# verify() as ir.MLIRError: the Python verifier's VerifyError never escapes.
# CHECK-LABEL: TEST: verifier_failure
@run
def verifier_failure():
    module = ir.Module.create()
    with ir.InsertionPoint(module.body):

        @func.FuncOp.from_py_func(tensor(4), tensor(2, 3), tensor(2, 3))
        def bad(x, a, b):
            structure.CopyOp(x, i64(1), i64(1), x.type, loc=ir.Location.file("model.py", 3, 4))
            return linear.MatMulOp(a, b, tensor(2, 3),
                                   loc=ir.Location.file("model.py", 5, 8)).result

    matmul = module.body.operations[0].regions[0].blocks[0].operations[1]
    # CHECK-NEXT: module: loc("model.py":3:4):
    # CHECK-SAME:     'ipu.copy' op copies from IPU 1 to itself; remove the copy
    # CHECK-NEXT: matmul: loc("model.py":5:8):
    # CHECK-SAME:     'ipu.matmul' op contracting dimensions differ: 2x3 and 2x3
    for name, op in [("module", module.operation), ("matmul", matmul.operation)]:
        try:
            op.verify()
        except ir.MLIRError as err:
            for diag in err.error_diagnostics:
                print(f"{name}: {diag.location}: {diag.message}")
