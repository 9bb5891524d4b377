"""Every ipu op has an entry in each op table keyed by op class, or a named exemption.

One parametrised check per table (rules, exemptions): an op added to the dialect without
a NumPy kernel (the JIT), a cost rule or a memory rule (the machine model) fails here,
not silently at run time. Add a table to `TABLES` to have it checked the same way.
"""

import pytest
from torch_mlir import ir

from poptorch.dialects import make_context, op_class
from poptorch.dialects.elementwise import UNARY_OPS
from poptorch.dialects.ipu import Ipu
from poptorch.errors import Error
from poptorch.runtime.jit.kernels.registry import KERNEL_EXEMPT, KERNELS, kernel
from poptorch.runtime.machine import cost, op_memory
from poptorch.runtime.machine.cost import COST_EXEMPT, COST_RULES, op_cost
from poptorch.runtime.machine.liveness import liveness
from poptorch.runtime.machine.op_memory import MEMORY_EXEMPT, MEMORY_RULES

# table name -> (rules, exemptions), both keyed by op class
TABLES = {
    "kernel": (KERNELS, KERNEL_EXEMPT),
    "cost": (COST_RULES, COST_EXEMPT),
    "memory": (MEMORY_RULES, MEMORY_EXEMPT),
}


@pytest.mark.parametrize("table", sorted(TABLES))
def test_every_ipu_op_has_a_rule_or_a_named_exemption(table):
    rules, exempt = TABLES[table]
    ops = set(Ipu.operations)
    missing = [op.OPERATION_NAME for op in Ipu.operations if op not in rules and op not in exempt]
    both = [op.OPERATION_NAME for op in ops & set(rules) & set(exempt)]
    unnamed = [op.OPERATION_NAME for op, reason in exempt.items()
               if not (isinstance(reason, str) and reason.strip())]
    # the JIT also has kernels for ops of other dialects (tensor.cast); an ipu key must be
    # a registered ipu op
    strangers = [op.OPERATION_NAME for op in (set(rules) | set(exempt)) - ops
                 if op.OPERATION_NAME.startswith("ipu.")]
    assert not missing, f"{table}: no rule and no exemption for {', '.join(missing)}"
    assert not both, f"{table}: both a rule and an exemption for {', '.join(both)}"
    assert not unnamed, f"{table}: exemptions without a reason: {', '.join(unnamed)}"
    assert not strangers, f"{table}: keys that are not ipu ops: {', '.join(strangers)}"


RELU = """
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "ipu.relu"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}"""


def _relu_function():
    context = make_context()
    with context:
        module = ir.Module.parse(RELU)
    return context, module, module.body.operations[0].operation


def test_an_ipu_op_without_a_cost_rule_is_an_error(monkeypatch):
    _context, _module, func = _relu_function()  # the context and module stay alive
    relu = func.regions[0].blocks[0].operations[0].operation
    assert op_cost(relu).cycles > 0
    kind = op_class(relu)
    monkeypatch.delitem(cost.COST_RULES, kind)
    with pytest.raises(Error, match=r"no rule for 'ipu.relu' \(ReluOp\).*COST_EXEMPT"):
        op_cost(relu)


def test_an_ipu_op_without_a_memory_rule_is_an_error(monkeypatch):
    _, _, func = _relu_function()
    assert liveness(func).bytes == 16
    kind = op_class(func.regions[0].blocks[0].operations[0].operation)
    monkeypatch.delitem(op_memory.MEMORY_RULES, kind)
    with pytest.raises(Error, match=r"no rule for 'ipu.relu' \(ReluOp\).*MEMORY_EXEMPT"):
        liveness(func)


def test_a_kernel_registered_twice_is_an_error():
    relu = UNARY_OPS["relu"]
    with pytest.raises(ValueError, match="ipu.relu is registered twice"):
        kernel(relu)(lambda x: x)
    assert KERNELS[relu].name == "ipu.relu"
