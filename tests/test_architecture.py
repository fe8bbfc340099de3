"""The package keeps the shape docs/architecture.md describes, as scripts/architecture.py reads it."""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_script():
    spec = importlib.util.spec_from_file_location("architecture", ROOT / "scripts" / "architecture.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["architecture"] = module
    spec.loader.exec_module(module)
    return module


arch = _load_script()
PACKAGES = sorted(p.parent.name for p in arch.PACKAGE.glob("*/__init__.py"))


def test_no_import_circle_anywhere_in_the_package() -> None:
    assert arch.cycles(arch.import_graph()) == []


def test_the_circle_finder_finds_circles_and_nothing_else() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"} - {"e"}}
    assert arch.cycles(graph) == [["a", "b", "c"]]


def test_imports_inside_functions_count(tmp_path: Path) -> None:
    # The loader/migrate circle was an import inside a function: the graph must see those.
    path = arch.PACKAGE / "format" / "loader.py"
    known = set(arch.import_graph())
    assert "runbook.checks" in set(arch.imported_modules(path, known))
    assert "runbook.format.engine_version" in set(arch.imported_modules(path, known))


def test_dependencies_point_down_the_layers() -> None:
    assert arch.layer_problems(arch.import_graph()) == []


def test_an_upward_or_sideways_import_is_refused() -> None:
    graph = {"runbook.format.loader": {"runbook.library.kb"},
             "runbook.run.walk": {"runbook.triage.scan"},
             "runbook.checks.gpu": {"runbook.format.model"}}
    problems = arch.layer_problems(graph)
    assert [p.split(":")[0] for p in problems] == [
        "runbook.checks.gpu imports runbook.format.model",
        "runbook.format.loader imports runbook.library.kb",
        "runbook.run.walk imports runbook.triage.scan"]
    assert "node side" in problems[0] and "higher layer" in problems[1] and "same layer" in problems[2]


def test_every_package_is_in_a_layer() -> None:
    assert [p for p in PACKAGES if arch.layer_of(p) is None] == []


def test_the_top_level_holds_few_modules() -> None:
    assert len(arch.top_level_modules()) <= arch.MAX_TOP_MODULES


def test_no_package_folder_is_a_long_flat_list() -> None:
    assert arch.crowded_folders() == []


def test_a_crowded_folder_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "runbook"
    (package / "wide").mkdir(parents=True)
    for i in range(arch.MAX_FOLDER_MODULES + 1):
        (package / "wide" / f"m{i}.py").write_text("")
    (package / "wide" / "__init__.py").write_text("")
    (package / "narrow").mkdir()
    (package / "narrow" / "a.py").write_text("")
    monkeypatch.setattr(arch, "PACKAGE", package)
    assert arch.crowded_folders() == [("wide", arch.MAX_FOLDER_MODULES + 1)]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_package_says_what_it_owns(package: str) -> None:
    doc = ast.get_docstring(ast.parse((arch.PACKAGE / package / "__init__.py").read_text("utf-8")))
    assert doc and len(doc) > 40, f"{package}/__init__.py needs a docstring saying what it owns"


def test_functions_stay_short() -> None:
    shape = arch.function_shape()
    assert arch.shape_problems(shape) == []
    assert len(shape.lengths) > 500  # the scan saw the whole package


def test_the_script_passes_as_ci_runs_it() -> None:
    assert arch.all_problems() == []


@pytest.mark.parametrize("page", ["architecture.md", "architecture.zh.md"])
def test_the_architecture_page_names_every_package_and_only_real_paths(page: str) -> None:
    text = (ROOT / "docs" / page).read_text("utf-8")
    for package in PACKAGES:
        assert f"{package}/" in text, f"docs/{page} does not mention {package}/"
    # Every module path the page names exists, so the map cannot drift from the code.
    for path in set(re.findall(r"`((?:[a-z_]+/)+[a-z_0-9]+\.py)`", text)):
        places = (arch.PACKAGE / path, arch.PACKAGE.parent / path, ROOT / path)
        assert any(p.is_file() for p in places), f"docs/{page}: {path} is not a file"


def test_the_places_to_add_things_exist() -> None:
    # "one line in `TRANSPORTS` in `transports/__init__.py`": each such name is defined there.
    text = (ROOT / "docs" / "architecture.md").read_text("utf-8")
    named = re.findall(r"`(\w+)` in `((?:[a-z_]+/)+[a-z_0-9]+\.py)`", text)
    assert len(named) >= 6
    for name, path in named:
        source = next(p for p in (arch.PACKAGE / path, ROOT / path) if p.is_file())
        assert name in _defined_names(source), f"docs/architecture.md: {name} is not defined in {path}"


def _defined_names(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names
