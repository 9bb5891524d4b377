"""The project's layout rules, checked by `make test` (after ruff, before lit).

1. import-linter's contracts in pyproject.toml (`[tool.importlinter]`): the layers
   (API, executor, compiler, frontend and options, runtime, passes, dialect, errors),
   the JIT and the machine model independent, no cycle between sibling packages.
2. No import cycle between any two modules, a package and its children included,
   counting imports inside functions (grimp's graph, which import-linter builds on).
3. An import inside a function says why it is not at the top: a comment naming an
   `optional dependency` or a measured `start-up cost` on its line or the line above.
4. No module over 600 lines.
5. Every package is listed in pyproject.toml's `packages` (a wheel holds only those).

Rules 3 to 5 also cover the top-level `popdist` package (PopDist's module name, a thin
re-export of poptorch.distributed); the import rules (1, 2) cover poptorch's graph.

`poptorch.dialects`, `.passes` and `.runtime` are mapped onto the top-level folders by
setuptools' package-dir, which grimp does not follow in an editable install: the checks
run on a view of the package made of symbolic links, in a temporary directory.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tempfile
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAPPED = ("dialects", "passes", "runtime")  # poptorch.<name> -> <name>/
OTHER_TOPS = ("popdist",)  # top-level packages beside poptorch (PopDist's module name)
MAX_LINES = 600
REASONS = ("optional dependency", "start-up cost")


def package_view(directory: str) -> str:
    """`directory`/poptorch: poptorch/'s entries with the mapped folders beside them."""
    view = os.path.join(directory, "poptorch")
    os.mkdir(view)
    source = os.path.join(ROOT, "poptorch")
    for name in os.listdir(source):
        if name != "__pycache__":
            os.symlink(os.path.join(source, name), os.path.join(view, name))
    for name in MAPPED:
        os.symlink(os.path.join(ROOT, name), os.path.join(view, name))
    return directory


def module_files() -> dict[str, str]:
    """Module name -> file of every module of the project."""
    files = {}
    tops = [("poptorch", "poptorch"), *[(m, f"poptorch.{m}") for m in MAPPED],
            *[(t, t) for t in OTHER_TOPS]]
    for top, package in tops:
        for directory, _, names in os.walk(os.path.join(ROOT, top)):
            for name in names:
                if name.endswith(".py"):
                    path = os.path.join(directory, name)
                    rel = os.path.relpath(path, os.path.join(ROOT, top))[:-3].split(os.sep)
                    if rel[-1] == "__init__":
                        rel = rel[:-1]
                    files[".".join([package, *rel])] = path
    return files


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def check_cycles(view: str) -> list[str]:
    sys.path.insert(0, view)
    import grimp  # optional dependency: a test tool, installed with the test extras

    graph = grimp.build_graph("poptorch", include_external_packages=False)
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    return [f"import cycle: {' -> '.join(component)}" for component in cycles(edges)]


def check_function_imports(files: dict[str, str]) -> list[str]:
    problems = []
    for path in sorted(files.values()):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text, path)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom):
                    nearby = " ".join(lines[max(0, inner.lineno - 2):inner.end_lineno])
                    if not any(reason in nearby for reason in REASONS):
                        problems.append(
                            f"{os.path.relpath(path, ROOT)}:{inner.lineno}: import inside "
                            f"{node.name}() without a comment naming an optional dependency "
                            "or a measured start-up cost: move it to the top of the module")
    return problems


def check_lengths(files: dict[str, str]) -> list[str]:
    problems = []
    for path in sorted(files.values()):
        with open(path, encoding="utf-8") as f:
            count = sum(1 for _ in f)
        if count > MAX_LINES:
            problems.append(f"{os.path.relpath(path, ROOT)}: {count} lines, more than "
                            f"{MAX_LINES}: split it by job")
    return problems


def check_packages(files: dict[str, str]) -> list[str]:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        listed = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
    found = {name for name, path in files.items() if path.endswith("__init__.py")}
    return [f"package {name} is missing from pyproject.toml's [tool.setuptools] packages"
            for name in sorted(found - listed)] + [
            f"pyproject.toml lists package {name}, which does not exist"
            for name in sorted(listed - found)]


def main() -> int:
    files = module_files()
    problems = check_function_imports(files) + check_lengths(files) + check_packages(files)
    with tempfile.TemporaryDirectory() as directory:
        view = package_view(directory)
        problems += check_cycles(view)
        env = dict(os.environ, PYTHONPATH=view)
        lint = subprocess.run([os.path.join(os.path.dirname(sys.executable), "lint-imports"),
                               "--no-cache", "--no-logo", os.path.join(ROOT, "pyproject.toml")],
                              cwd=directory, env=env)
    for problem in problems:
        print(problem)
    print(f"layout: {len(files)} modules, {len(problems)} problems")
    return 1 if problems or lint.returncode else 0


if __name__ == "__main__":
    sys.exit(main())
