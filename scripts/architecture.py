"""The shape of engine/runbook, read from the code: its import graph and its function sizes.

    python scripts/architecture.py            # packages, their imports, and every rule broken
    python scripts/architecture.py --dot      # the package graph for Graphviz

Rules (docs/architecture.md explains them; tests/test_architecture.py holds them):
- no import circle between modules, counting imports inside functions too;
- a package imports only packages in lower layers (LAYERS), never one beside it;
- the node side (`checks`, `probe`) imports nothing of the client;
- at most MAX_TOP_MODULES modules at the top of the package, and at most MAX_FOLDER_MODULES
  side by side in any package folder (group by domain when one grows: checks/gpu/, ...);
- no function longer than MAX_FUNCTION_LINES; median and 90th percentile kept small.
Exit status 1 when a rule is broken.
"""

from __future__ import annotations

import argparse
import ast
import statistics
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "engine" / "runbook"

# Lower layers first. A package may import packages of lower layers only; packages in
# one layer are independent of each other. "runbook" is the top-level __init__ (its version).
LAYERS: list[set[str]] = [
    {"runbook", "checks"},                    # the node side's registry and the version
    {"probe", "transports", "jobs"},          # the node side, getting a request to a node; job analyses
    {"format"},                               # what a runbook file is
    {"library"},                              # every runbook and article, found and searchable
    {"run", "triage", "i18n"},                # walking nodes; reading logs; two languages
    {"testing", "collect", "report", "site", "versions"},
    {"alerts", "mcp_server"},                 # the Alertmanager receiver; an assistant's tools (MCP)
    {"cli"},                                  # one package per subcommand
    {"__main__"},                             # `python -m runbook`
]
NODE_SIDE = {"checks", "probe"}
MAX_TOP_MODULES = 10
MAX_FOLDER_MODULES = 20
MAX_FUNCTION_LINES, MAX_MEDIAN, MAX_P90 = 60, 8, 25


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def source_files() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "_shipped" not in p.parts)


def imported_modules(path: Path, known: set[str]) -> Iterator[str]:
    """Every module of ours that `path` imports, at any depth of its code."""
    this = module_name(path)
    package = this if path.name == "__init__.py" else this.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            for alias in node.names:
                child = f"{base}.{alias.name}"
                if child in known:  # `from runbook.format import loader`: the submodule
                    yield child
                elif base in known:
                    yield base


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join([*parts, node.module] if node.module else parts)


def import_graph() -> dict[str, set[str]]:
    files = source_files()
    known = {module_name(p) for p in files}
    return {module_name(p): set(imported_modules(p, known)) - {module_name(p)} for p in files}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "runbook"


def layer_of(package: str) -> int | None:
    return next((i for i, layer in enumerate(LAYERS) if package in layer), None)


def layer_problems(graph: dict[str, set[str]]) -> list[str]:
    problems = []
    for module, imports in sorted(graph.items()):
        mine = package_of(module)
        for target in sorted(imports):
            theirs = package_of(target)
            if theirs == mine:
                continue
            why = _forbidden(mine, theirs)
            if why:
                problems.append(f"{module} imports {target}: {why}")
    return problems


def _forbidden(mine: str, theirs: str) -> str | None:
    here, there = layer_of(mine), layer_of(theirs)
    if here is None or there is None:
        return f"package {(mine if here is None else theirs)!r} is in no layer of scripts/architecture.py"
    if mine in NODE_SIDE and theirs != "checks" and theirs != "runbook":
        return "the node side (checks, probe) imports nothing of the client"
    if there == here:
        return f"{mine} and {theirs} are in the same layer and must not depend on each other"
    if there > here:
        return f"{theirs} is in a higher layer than {mine} (dependencies point down)"
    return None


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    packages: dict[str, set[str]] = {}
    for module, imports in graph.items():
        mine = package_of(module)
        packages.setdefault(mine, set()).update(package_of(t) for t in imports if package_of(t) != mine)
    return packages


@dataclass
class Shape:
    """Function sizes in lines (`def` to its last line, nested functions counted on their own)."""

    lengths: dict[str, int] = field(default_factory=dict)

    @property
    def median(self) -> float:
        return statistics.median(self.lengths.values())

    @property
    def p90(self) -> int:
        ordered = sorted(self.lengths.values())
        return ordered[int(0.9 * (len(ordered) - 1))]

    def longest(self, count: int = 5) -> list[tuple[str, int]]:
        return sorted(self.lengths.items(), key=lambda kv: -kv[1])[:count]


def function_shape() -> Shape:
    shape = Shape()
    for path in source_files():
        for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                where = f"{path.relative_to(ROOT)}:{node.lineno}:{node.name}"
                shape.lengths[where] = (node.end_lineno or node.lineno) - node.lineno + 1
    return shape


def top_level_modules() -> list[str]:
    return sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))


def crowded_folders() -> list[tuple[str, int]]:
    """Package folders holding more than MAX_FOLDER_MODULES modules side by side."""
    out = []
    for folder in sorted({p.parent for p in source_files()}):
        if folder == PACKAGE:
            continue  # the top has its own, smaller limit
        count = sum(1 for p in folder.glob("*.py") if p.name != "__init__.py")
        if count > MAX_FOLDER_MODULES:
            out.append((str(folder.relative_to(PACKAGE)), count))
    return out


def shape_problems(shape: Shape) -> list[str]:
    problems = [f"{where}: {lines} lines (at most {MAX_FUNCTION_LINES})"
                for where, lines in shape.longest(len(shape.lengths)) if lines > MAX_FUNCTION_LINES]
    if shape.median > MAX_MEDIAN:
        problems.append(f"median function length {shape.median} lines (at most {MAX_MEDIAN})")
    if shape.p90 > MAX_P90:
        problems.append(f"90th percentile function length {shape.p90} lines (at most {MAX_P90})")
    return problems


def all_problems() -> list[str]:
    graph = import_graph()
    problems = [f"import circle: {' -> '.join(c)}" for c in cycles(graph)]
    problems += layer_problems(graph)
    top = top_level_modules()
    if len(top) > MAX_TOP_MODULES:
        problems.append(f"{len(top)} modules at the top of engine/runbook (at most {MAX_TOP_MODULES}): "
                        + ", ".join(top))
    problems += [f"{folder}/ holds {count} modules side by side (at most {MAX_FOLDER_MODULES}): group "
                 "them by domain in subpackages" for folder, count in crowded_folders()]
    return problems + shape_problems(function_shape())


def _dot(packages: dict[str, set[str]]) -> str:
    edges = [f'  "{a}" -> "{b}";' for a, targets in sorted(packages.items()) for b in sorted(targets)]
    return "digraph runbook {\n  rankdir=TB;\n" + "\n".join(edges) + "\n}\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dot", action="store_true", help="print the package graph for Graphviz")
    args = parser.parse_args()
    packages = package_graph(import_graph())
    if args.dot:
        sys.stdout.write(_dot(packages))
        return 0
    for layer in reversed(LAYERS):
        for name in sorted(layer):
            print(f"{name:<11} -> {', '.join(sorted(packages.get(name, ()))) or '(nothing of ours)'}")
    shape = function_shape()
    print(f"\n{len(shape.lengths)} functions: median {shape.median:g} lines, 90th percentile {shape.p90}, "
          f"longest {shape.longest(1)[0][1]} ({shape.longest(1)[0][0]})")
    problems = all_problems()
    for problem in problems:
        print(f"problem: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
