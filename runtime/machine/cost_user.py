"""Cost rules of the ops that run user code: `ipu.custom` and `ipu.host_call`.

- `ipu.custom`: the cost registered with the op (poptorch.register_custom_op(...,
  cost=...), a `CustomOpCost` of cycles and temporary bytes from the input and output
  shapes and the attributes), all of it compute. Without one (or when the op is not
  registered in this process), the op is charged as an elementwise op of its first
  result with no PopLibs figure (`cost_families.elementwise`: one natural vector a
  cycle per worker, its smaller operands' shares received): a single pass over the
  data, the least a custom op that reads its inputs and writes its outputs does.
- `ipu.host_call`: a device-to-host transfer of its operands and a host-to-device one
  of its results (`Machine.host_cycles` each: the host link's latency plus bytes over
  its bandwidth, one transfer per tensor), plus the host's turnaround
  `HOST_CALL_LATENCY`, all of it exchange: the IPU waits on the host.
"""

from __future__ import annotations

import math

from torch_mlir import ir

from poptorch.runtime.machine import cost_families as family
from poptorch.runtime.machine.plan import OpCost, Plan
from poptorch.runtime.machine.system import value_bytes
from poptorch.runtime.user_code import CUSTOM_OPS, CustomOpCost, attribute_values

# The host's turnaround of one callback: the Poplar host function's synchronisation
# and the Python call. An assumption, not a published figure (Graphcore documents
# none for PopTorch's CPU ops): 20 us, the order of a host sync between the IPU and
# the host program (a few round trips of `Machine.hostLinkLatency`: 1.2 us on an
# IPU-M2000, 0.6 us over PCIe) plus a Python call that converts the tensors (10 us and
# more measured on the development VM for `torch.from_numpy` on two tensors and a call).
HOST_CALL_LATENCY = 20e-6


def custom(p: Plan) -> OpCost:
    """The registered cost, or a single pass over the data (module docstring)."""
    attrs = p.op.attributes
    key = (ir.StringAttr(attrs["op_name"]).value, ir.StringAttr(attrs["domain"]).value,
           ir.IntegerAttr(attrs["domain_version"]).value)
    impl = CUSTOM_OPS.get(key)
    if impl is None or impl.cost is None:
        return family.elementwise(p)
    return _registered(p, impl.cost)


def _registered(p: Plan, cost) -> OpCost:
    attrs = attribute_values(p.op.attributes["attrs"])
    got = cost([tuple(s) for s in p.shapes], [tuple(s) for s in p.out_shapes], **attrs)
    if not isinstance(got, CustomOpCost):
        got = CustomOpCost(*got)
    return OpCost(compute=int(got.cycles), temporary_bytes=int(got.temporary_bytes))


def host_call(p: Plan) -> OpCost:
    """Transfers both ways and the host's turnaround (module docstring)."""
    m = p.machine
    transfers = sum(m.host_cycles(value_bytes(v))
                    for v in [*p.op.operands, *p.op.results])
    return OpCost(exchange=transfers + math.ceil(HOST_CALL_LATENCY * m.tileClockFrequency))
