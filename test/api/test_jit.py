"""The JIT's buffer reuse: an elementwise op writes into an operand's array when nothing
reads that array later, never into an argument, a value read twice, one with a live view
or a returned one; and
the allocator tuning that lets a program's arrays reuse pages between calls."""

import os
import platform
import subprocess
import sys

import numpy as np
import pytest
from torch_mlir import ir

from poptorch.dialects import make_context
from poptorch.runtime import heap
from poptorch.runtime.jit import compile_module
from poptorch.runtime.kernels import REUSE_BYTES

T = "tensor<64x512xf32>"
CHAIN = f"""
func.func @main(%x: {T}, %b: tensor<512xf32>) -> ({T}, {T}, tensor<32768xf32>) {{
  %0 = "ipu.exp"(%x) : ({T}) -> {T}
  %1 = "ipu.add"(%0, %b) : ({T}, tensor<512xf32>) -> {T}
  %2 = "ipu.relu"(%1) : ({T}) -> {T}
  %3 = "ipu.mul"(%2, %2) : ({T}, {T}) -> {T}
  %4 = "ipu.reshape"(%3) : ({T}) -> tensor<32768xf32>
  %5 = "ipu.neg"(%3) : ({T}) -> {T}
  %6 = "ipu.sub"(%5, %x) : ({T}, {T}) -> {T}
  %7 = "ipu.exp"(%6) : ({T}) -> {T}
  %8 = "ipu.exp"(%x) : ({T}) -> {T}
  %9 = "ipu.neg"(%8) : ({T}) -> {T}
  %10 = "ipu.add"(%8, %9) : ({T}, {T}) -> {T}
  %11 = "ipu.reshape"(%10) : ({T}) -> tensor<32768xf32>
  %12 = "ipu.exp"(%11) : (tensor<32768xf32>) -> tensor<32768xf32>
  return %6, %7, %12 : {T}, {T}, tensor<32768xf32>
}}
"""


@pytest.fixture(scope="module")
def program():
    with make_context(), ir.Location.unknown():
        yield compile_module(ir.Module.parse(CHAIN))


def test_reuse_goes_only_to_arrays_nothing_else_reads(program):
    body = [line.strip() for line in program.source.splitlines() if " = ipu_" in line]
    assert body == [
        "v2 = ipu_exp(v0)",                                      # an argument: never
        "v3 = ipu_add(v2, v1, ranks=(2, 1), out_rank=2, out=v2)",
        "v4 = ipu_relu(v3, out=v3)",
        "v5 = ipu_mul(v4, v4)",                                  # read twice
        "v6 = ipu_reshape(v5, rank=2, shape=(32768,))",           # v5 also has a view
        "v7 = ipu_neg(v5)",
        "v8 = ipu_sub(v7, v0, out=v7)",
        "v9 = ipu_exp(v8)",                                      # v8 is returned
        "v10 = ipu_exp(v0)",
        "v11 = ipu_neg(v10)",
        "v12 = ipu_add(v10, v11, out=v10)",   # neg read v10 earlier and kept nothing
        "v13 = ipu_reshape(v12, rank=2, shape=(32768,))",
        "v14 = ipu_exp(v13, out=v13)",        # a view of an array nothing else reads
    ]


def test_reused_buffers_give_the_same_numbers(program):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 512), dtype=np.float32)
    b = rng.standard_normal(512, dtype=np.float32)
    before = x.copy()
    six, seven, fourteen = program.run(x, b)
    squared = np.maximum(np.exp(x) + b, 0) ** 2
    np.testing.assert_array_equal(six, -squared - x)
    np.testing.assert_array_equal(seven, np.exp(-squared - x))
    np.testing.assert_array_equal(fourteen, np.exp((np.exp(x) - np.exp(x)).reshape(-1)))
    np.testing.assert_array_equal(x, before)  # the argument is untouched


def test_leading_axes_that_do_not_fit_get_a_new_array(program):
    """The types say nothing about leading (replica) axes: a reused array of the wrong
    shape at run time is left alone."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 512), dtype=np.float32)
    b = rng.standard_normal((3, 512), dtype=np.float32)  # 3 replicas' biases
    six, _, _ = program.run(x, b)
    assert six.shape == (3, 64, 512)
    squared = np.maximum(np.exp(x) + b[:, None], 0) ** 2
    np.testing.assert_array_equal(six, -squared - x)
    assert REUSE_BYTES <= x.nbytes  # the chain was big enough to reuse


@pytest.mark.parametrize("setting, tuned", [(None, True), ("0", False)])
def test_freed_memory_is_kept_unless_turned_off(setting, tuned):
    """Compiling a program tunes glibc's allocator once per process (runtime/heap.py);
    POPTORCH_KEEP_FREED_MEMORY=0 leaves it alone."""
    env = {k: v for k, v in os.environ.items() if k != heap.VARIABLE}
    if setting is not None:
        env[heap.VARIABLE] = setting
    code = ("from poptorch.runtime import heap; from poptorch.dialects import make_context\n"
            "from poptorch.runtime.jit import compile_module\n"
            "from torch_mlir import ir\n"
            "with make_context(), ir.Location.unknown():\n"
            "    compile_module(ir.Module.parse('func.func @main() { return }'))\n"
            "print(heap.keep_freed_memory.cache_info().currsize, heap.keep_freed_memory())")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True)
    # compiling called it (one cached result) and it tuned the allocator unless told not to
    assert done.stdout.split() == ["1", str(tuned and platform.libc_ver()[0] == "glibc")]


F = "tensor<128x512xf32>"
B = "tensor<128x512xi1>"
SELECT = f"""
func.func @main(%c: {B}, %x: {F}) -> ({F}, {F}, {B}) {{
  %0 = "ipu.exp"(%x) : ({F}) -> {F}
  %1 = "ipu.neg"(%x) : ({F}) -> {F}
  %2 = "ipu.select"(%c, %x, %0) : ({B}, {F}, {F}) -> {F}
  %3 = "ipu.select"(%c, %1, %x) : ({B}, {F}, {F}) -> {F}
  %4 = "ipu.logical_not"(%c) : ({B}) -> {B}
  %5 = "ipu.select"(%4, %c, %c) : ({B}, {B}, {B}) -> {B}
  return %2, %3, %5 : {F}, {F}, {B}
}}
"""


def test_select_writes_into_either_branch_never_the_condition():
    with make_context(), ir.Location.unknown():
        program = compile_module(ir.Module.parse(SELECT))
    calls = [line.strip() for line in program.source.splitlines() if "ipu_select(" in line]
    assert calls == ["v4 = ipu_select(v0, v1, v2, out=v2)", "v5 = ipu_select(v0, v3, v1, out=v3)",
                     "v7 = ipu_select(v6, v0, v0, out=v6)"]
    rng = np.random.default_rng(0)
    c = rng.random((128, 512)) > 0.5
    x = rng.standard_normal((128, 512), dtype=np.float32)
    two, three, five = program.run(c, x)
    np.testing.assert_array_equal(two, np.where(c, x, np.exp(x)))
    np.testing.assert_array_equal(three, np.where(c, -x, x))
    assert c.nbytes >= REUSE_BYTES  # the condition's array was offered to the kernel
    np.testing.assert_array_equal(five, c)  # where(not c, c, c) is c, whatever is reused
