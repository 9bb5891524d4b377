"""How deeply an MLIR text nests, measured before MLIR's parser sees it.

MLIR's parser, verifier and printer recurse once per nesting level on the C stack, and
overflow it on deep enough input: a segmentation fault with no diagnostic. ipu-opt
therefore refuses text nested deeper than MAX_DEPTH, counting every `(`, `[`, `{` and
`<` outside string literals and `//` comments as a level (`->`, `>=` and `<=` are not
brackets).

Measured with the default 8 MB stack (ulimit -s 8192), ipu-opt crashed at these depths
in these units: generic ops nested in regions at about 4,400 (two brackets a level:
`"a.b"() ({`), nested `module {` at about 4,200, nested array attributes at about 7,800;
nested types did not crash up to 14,000. MAX_DEPTH = 1000 keeps a margin of more than
4x under the lowest (with every ipu pass, canonicalize and cse run on input 1000 deep),
while real input nests far less: the deepest file of this repository's tests nests 7.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_DEPTH = 1000

# A string literal (escapes allowed, ending at the line's end if unterminated), a
# comment, the arrow of a function type, an affine comparison, or one bracket.
_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"?|//[^\n]*|->|>=|<=|[\[({<\])}>]')
_OPEN = frozenset("[({<")
_CLOSE = frozenset("])}>")


@dataclass(frozen=True)
class TooDeep:
    """Where the text first nests deeper than the limit (1-based line and column)."""

    line: int
    col: int
    limit: int

    @property
    def message(self) -> str:
        return (f"input nested more than {self.limit} levels deep (brackets '(', '[', '{{', "
                f"'<'); ipu-opt refuses it, as MLIR's parser could overflow its stack")


def find_too_deep(text: str, limit: int = MAX_DEPTH) -> TooDeep | None:
    """The first bracket opening level `limit + 1`, or None when `text` stays within it.

    A closing bracket with nothing open counts for nothing: text MLIR can parse has its
    brackets balanced, so on it the measure is the true nesting.
    """
    depth = 0
    for token in _TOKEN.finditer(text):
        ch = token.group()
        if ch in _OPEN:
            depth += 1
            if depth > limit:
                start = token.start()
                line_start = text.rfind("\n", 0, start) + 1
                return TooDeep(text.count("\n", 0, start) + 1, start - line_start + 1, limit)
        elif ch in _CLOSE:
            depth = max(0, depth - 1)
    return None
