"""Task code written once, run on arrays and emitted as C++: the math namespaces a task's functions take.

A task module writes its reference, targets, reward terms, termination and success as functions of a math
namespace `m` and rows of values (one array per quantity, over the batch): `m.sin(phase)`, `a * b`,
`m.where(mask, a, b)`, `x < y`, `mask | other`. Called with `ArrayMath(xp)` (numpy or torch), they compute
on arrays; called with `CppMath` and `Expr` inputs, they record the same operations as C++ statements,
which the native step's header receives as functions (`native_step.header`). So a reward change is one
edit in one language, and the kernel cannot drift from the eager step that tests hold it to.

Python numbers stay Python numbers until they meet a row, as in the eager code: constants fold in double
precision, then enter the row's arithmetic in its own precision (float literals in float code).
"""

from __future__ import annotations

import math
from typing import Any, Sequence


class ArrayMath:
    """The namespace over numpy or torch arrays (`xp`)."""

    def __init__(self, xp: Any):
        self.xp = xp

    def sin(self, x: Any) -> Any:
        """Sine, elementwise."""
        return self.xp.sin(x)

    def cos(self, x: Any) -> Any:
        """Cosine, elementwise."""
        return self.xp.cos(x)

    def exp(self, x: Any) -> Any:
        """Exponential, elementwise."""
        return self.xp.exp(x)

    def sqrt(self, x: Any) -> Any:
        """Square root, elementwise."""
        return self.xp.sqrt(x)

    def abs(self, x: Any) -> Any:
        """Absolute value, elementwise."""
        return self.xp.abs(x)

    def where(self, mask: Any, yes: Any, no: Any) -> Any:
        """`yes` where `mask` holds, else `no`."""
        return self.xp.where(mask, yes, no)

    def zeros_like(self, x: Any) -> Any:
        """Zeros shaped like `x`."""
        return self.xp.zeros_like(x)

    def ones_like(self, x: Any) -> Any:
        """Ones shaped like `x`."""
        return self.xp.ones_like(x)

    def as_float(self, mask: Any) -> Any:
        """1.0 where `mask` holds, else 0.0."""
        return mask * 1.0


class CppMath:
    """The namespace that records operations on `Expr` rows as C++ statements.

    `precision` "float" computes on the kernel's float vectors (V: vsin, ..., `1.5f` literals), "double" on its
    double vectors (DV: dsin, ..., episode starts).
    """

    def __init__(self, precision: str = "float"):
        if precision not in ("float", "double"):
            raise ValueError(f"precision must be 'float' or 'double', got {precision!r}")
        self.precision = precision
        self.statements: list[str] = []
        self._prefix = "v" if precision == "float" else "d"

    def input(self, code: str) -> "Expr":
        """A row the generated function receives (a parameter or an array element)."""
        return Expr(self, code)

    def literal(self, value: float) -> str:
        """A C++ literal of `value` in this precision."""
        value = float(value)
        if math.isinf(value):
            return ("INFINITY" if value > 0 else "-INFINITY") if self.precision == "float" else \
                ("HUGE_VAL" if value > 0 else "-HUGE_VAL")
        if math.isnan(value):
            raise ValueError("a task constant is NaN")
        return f"{value!r}f" if self.precision == "float" else repr(value)

    def splat(self, value: float) -> "Expr":
        """`value` in every lane."""
        return self._new(f"{'splat' if self.precision == 'float' else 'dsplat'}({self.literal(value)})")

    def _new(self, code: str, mask: bool = False) -> "Expr":
        name = f"e{len(self.statements)}"
        self.statements.append(f"const auto {name} = {code};")
        return Expr(self, name, mask)

    def _call(self, function: str, x: "Expr") -> "Expr":
        return self._new(f"{self._prefix}{function}({_code(self, x)})")

    def sin(self, x: Any) -> "Expr":
        """Sine, elementwise."""
        return self._call("sin", x)

    def cos(self, x: Any) -> "Expr":
        """Cosine, elementwise."""
        return self._call("cos", x)

    def exp(self, x: Any) -> "Expr":
        """Exponential, elementwise."""
        return self._call("exp", x)

    def sqrt(self, x: Any) -> "Expr":
        """Square root, elementwise."""
        return self._call("sqrt", x)

    def abs(self, x: Any) -> "Expr":
        """Absolute value, elementwise."""
        return self._call("abs", x)

    def where(self, mask: "Expr", yes: Any, no: Any) -> "Expr":
        """`yes` where `mask` holds, else `no` (numbers in every lane)."""
        yes, no = (value if isinstance(value, Expr) else self.splat(value) for value in (yes, no))
        return self._new(f"({mask.code} ? {yes.code} : {no.code})")

    def zeros_like(self, x: "Expr") -> "Expr":
        """Zeros shaped like `x`."""
        return self.splat(0.0)

    def ones_like(self, x: "Expr") -> "Expr":
        """Ones shaped like `x`."""
        return self.splat(1.0)

    def as_float(self, mask: "Expr") -> "Expr":
        """1.0 where `mask` holds, else 0.0."""
        return self.where(mask, 1.0, 0.0)

    def function(self, signature: str, outputs: Sequence[tuple[str, Any]]) -> str:
        """A C++ inline function: `signature` (its head, e.g. "inline void f(V t, V out[3])"), the recorded
        statements, then each output assigned (name, Expr or number)."""
        values = [(name, value if isinstance(value, Expr) else self.splat(value)) for name, value in outputs]
        lines = [f"{signature} {{", *(f"  {statement}" for statement in self.statements)]
        lines += [f"  {name} = {value.code};" for name, value in values]
        lines.append("}")
        return "\n".join(lines)


def _code(math_: CppMath, value: Any) -> str:
    return value.code if isinstance(value, Expr) else math_.literal(value)


class Expr:
    """A row of values in generated C++: the name of the local (or parameter) that holds it."""

    __array_priority__ = 1000  # numpy scalars defer to Expr's reflected operators

    def __init__(self, math_: CppMath, code: str, mask: bool = False):
        self.math, self.code, self.mask = math_, code, mask

    def _binary(self, other: Any, operator: str, reflected: bool = False, mask: bool = False) -> "Expr":
        left, right = _code(self.math, self), _code(self.math, other)
        if reflected:
            left, right = right, left
        return self.math._new(f"{left} {operator} {right}", mask)

    def __add__(self, other: Any) -> "Expr":
        return self._binary(other, "+")

    def __radd__(self, other: Any) -> "Expr":
        return self._binary(other, "+", reflected=True)

    def __sub__(self, other: Any) -> "Expr":
        return self._binary(other, "-")

    def __rsub__(self, other: Any) -> "Expr":
        return self._binary(other, "-", reflected=True)

    def __mul__(self, other: Any) -> "Expr":
        return self._binary(other, "*")

    def __rmul__(self, other: Any) -> "Expr":
        return self._binary(other, "*", reflected=True)

    def __truediv__(self, other: Any) -> "Expr":
        return self._binary(other, "/")

    def __rtruediv__(self, other: Any) -> "Expr":
        return self._binary(other, "/", reflected=True)

    def __neg__(self) -> "Expr":
        return self.math._new(f"-{self.code}")

    def __lt__(self, other: Any) -> "Expr":
        return self._binary(other, "<", mask=True)

    def __le__(self, other: Any) -> "Expr":
        return self._binary(other, "<=", mask=True)

    def __gt__(self, other: Any) -> "Expr":
        return self._binary(other, ">", mask=True)

    def __ge__(self, other: Any) -> "Expr":
        return self._binary(other, ">=", mask=True)

    def __and__(self, other: "Expr") -> "Expr":
        return self._binary(other, "&", mask=True)

    def __or__(self, other: "Expr") -> "Expr":
        return self._binary(other, "|", mask=True)

    def __invert__(self) -> "Expr":
        return self.math._new(f"~{self.code}", mask=True)

    def __bool__(self) -> bool:
        raise TypeError("a traced row has no truth value: use m.where or mask operators (&, |, ~)")
