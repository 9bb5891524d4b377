"""A builder of window kernels' functions (`pooling`, `convolution`): SSA lines of a
func.func body with i64 index arithmetic, loops, loads and stores, and the function's
header (`FusedKernel`'s arguments: input and output pointers, the number of replicas,
each input's replica stride and the range of the outer parallel loop a call runs)."""

from __future__ import annotations


class Lines:
    """Lines of a kernel function's body; i64 constants go to its head, once each (so
    that every use, in any loop, is dominated by them)."""

    def __init__(self) -> None:
        self.head: list[str] = []
        self.lines: list[str] = []
        self.indent = "    "
        self.constants: dict[int | str, str] = {}
        self.count = 0

    def add(self, text: str) -> None:
        self.lines.append(self.indent + text)

    def emit(self, text: str) -> str:
        self.count += 1
        self.add(f"%v{self.count} = {text}")
        return f"%v{self.count}"

    def const(self, value: int | str) -> str:
        """An i64 constant, or a literal of another type ("0.0 : f32")."""
        if value not in self.constants:
            literal = f"{value} : i64" if isinstance(value, int) else value
            self.constants[value] = f"%k{len(self.constants)}"
            self.head.append(f"    {self.constants[value]} = arith.constant {literal}")
        return self.constants[value]

    def loop(self, upper: int | str) -> str:
        """Open `scf.for` from 0 to `upper`; returns its induction variable."""
        self.count += 1
        bound = upper if isinstance(upper, str) else self.const(upper)
        self.add(f"scf.for %i{self.count} = {self.const(0)} to {bound} step "
                 f"{self.const(1)} : i64 {{")
        self.indent += "  "
        return f"%i{self.count}"

    def loop_from(self, lower: str, upper: str) -> str:
        """Open `scf.for` from `lower` to `upper` (SSA values)."""
        self.count += 1
        self.add(f"scf.for %i{self.count} = {lower} to {upper} step {self.const(1)} : i64 {{")
        self.indent += "  "
        return f"%i{self.count}"

    def split(self, replica: str, extent: int) -> str:
        """Open the outer parallel loop, of `extent` iterations a replica, over its part
        in the call's range [%lo, %hi) of replicas x `extent` iterations; returns its
        induction variable."""
        base = self.emit(f"arith.muli {replica}, {self.const(extent)} : i64")
        ends = []
        for end in ("%lo", "%hi"):
            shifted = self.emit(f"arith.subi {end}, {base} : i64")
            below = self.emit(f"arith.minsi {shifted}, {self.const(extent)} : i64")
            ends.append(self.emit(f"arith.maxsi {below}, {self.const(0)} : i64"))
        return self.loop_from(*ends)

    def close(self) -> None:
        self.indent = self.indent[:-2]
        self.add("}")

    def pick(self, condition: str, a: str, b: str) -> str:
        """`a` where the i1 `condition` holds, else `b` (i64)."""
        return self.emit(f"arith.select {condition}, {a}, {b} : i64")

    def compare(self, predicate: str, a: str, b: str) -> str:
        return self.emit(f"arith.cmpi {predicate}, {a}, {b} : i64")

    def plus(self, value: str, amount: int) -> str:
        return self.emit(f"arith.addi {value}, {self.const(amount)} : i64") if amount \
            else value

    def index(self, base: str | None, terms: list[tuple[str, int]]) -> str:
        """base (None: 0) + the sum of value * stride over `terms`."""
        for value, stride in terms:
            if stride == 0:
                continue
            scaled = value if stride == 1 else self.emit(
                f"arith.muli {value}, {self.const(stride)} : i64")
            base = scaled if base is None else self.emit(f"arith.addi {base}, {scaled} : i64")
        return self.const(0) if base is None else base

    def load(self, pointer: str, index: str, element: str) -> str:
        address = self.emit(f"llvm.getelementptr {pointer}[{index}] : (!llvm.ptr, i64) "
                            f"-> !llvm.ptr, {element}")
        return self.emit(f"llvm.load {address} : !llvm.ptr -> {element}")

    def store(self, value: str, pointer: str, index: str, element: str) -> None:
        address = self.emit(f"llvm.getelementptr {pointer}[{index}] : (!llvm.ptr, i64) "
                            f"-> !llvm.ptr, {element}")
        self.add(f"llvm.store {value}, {address} : {element}, !llvm.ptr")

    def text(self, header: str) -> str:
        return "\n".join([header] + self.head + self.lines + ["    return", "  }"])


def header(name: str, inputs: int, outputs: int) -> str:
    """The func.func line of a window kernel of `inputs` and `outputs` pointers."""
    args = [f"%in{i}: !llvm.ptr {{llvm.noalias}}" for i in range(inputs)]
    args += [f"%out{i}: !llvm.ptr {{llvm.noalias}}" for i in range(outputs)]
    args += ["%replicas: i64"] + [f"%step{i}: i64" for i in range(inputs)]
    args += ["%lo: i64", "%hi: i64"]
    return f"  func.func @{name}({', '.join(args)}) {{"
