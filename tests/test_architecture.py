"""The import directions of docs/architecture.md, checked by parsing every import.

Each module of ``deepecgkit`` and ``deepecg_assets`` is parsed with :mod:`ast`
(nothing is imported, so a lazy import inside a function counts as much as
one at the top of the file). Two rules:

* a package imports only the packages ``ALLOWED`` lists for it (its own
  modules are always allowed);
* no two modules import each other, directly or through others.

Old import paths are plain strings in ``__moved__`` / ``__moved_modules__``
tables (:mod:`deepecgkit._compat`), resolved only when an old name is used, so
they are no import edge. The one deprecated import that points against the
directions is listed in ``DEPRECATED_EDGES`` with the release that drops it.
The last tests plant a violation and a cycle in a scratch tree and show both
are caught, so the check cannot pass by finding nothing.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]
TOP_PACKAGES = ("deepecgkit", "deepecg_assets")
#: Modules at the bottom: import nothing of ours (``deepecgkit`` itself only holds the version).
_BASE = (
    "deepecgkit",
    "deepecgkit._compat",
    "deepecgkit.defaults",
    "deepecgkit.io",
    "deepecgkit.progress",
)
#: Package -> the other packages of ours it may import (docs/architecture.md).
ALLOWED: dict[str, frozenset[str]] = {
    "deepecgkit": frozenset(),
    "deepecgkit._compat": frozenset(),
    "deepecgkit.defaults": frozenset(),
    "deepecgkit.io": frozenset(),
    "deepecgkit.progress": frozenset(),
    "deepecgkit.utils": frozenset(_BASE),
    "deepecgkit.registry": frozenset(_BASE),
    "deepecgkit.rundir": frozenset(("deepecgkit", "deepecgkit.io", "deepecgkit.progress")),
    "deepecgkit.datasets": frozenset((*_BASE, "deepecgkit.registry", "deepecgkit.utils")),
    "deepecgkit.models": frozenset(
        (*_BASE, "deepecgkit.registry", "deepecgkit.utils", "deepecgkit.rundir")
    ),
    "deepecgkit.evaluation": frozenset(
        (
            *_BASE,
            "deepecgkit.registry",
            "deepecgkit.utils",
            "deepecgkit.rundir",
            "deepecgkit.datasets",
            "deepecgkit.models",
        )
    ),
    "deepecgkit.training": frozenset(
        (
            *_BASE,
            "deepecgkit.registry",
            "deepecgkit.utils",
            "deepecgkit.rundir",
            "deepecgkit.datasets",
            "deepecgkit.models",
            "deepecgkit.evaluation",
        )
    ),
    "deepecgkit.analysis": frozenset((*_BASE, "deepecgkit.rundir")),
    "deepecgkit.statistical_report": frozenset(
        (*_BASE, "deepecgkit.rundir", "deepecgkit.analysis")
    ),
    # The command dispatcher names its subcommands' modules as strings; it imports none.
    "deepecgkit.cli": frozenset(_BASE),
    "deepecg_assets": frozenset(
        (
            *_BASE,
            "deepecgkit.registry",
            "deepecgkit.rundir",
            "deepecgkit.analysis",
            "deepecgkit.evaluation",
            "deepecgkit.statistical_report",
        )
    ),
}
#: Consumers read run directories through ``rundir.read`` and never write one.
CONSUMERS = ("deepecgkit.analysis", "deepecgkit.statistical_report", "deepecg_assets")
WRITE_SIDE = frozenset({"deepecgkit.rundir.write", "deepecgkit.rundir.synthetic"})
#: (importing module, imported module): deprecated delegations kept for one release.
DEPRECATED_EDGES = frozenset(
    {
        # ECGEvaluator.cross_validate delegates to its new home until deepecgkit 0.2.0.
        ("deepecgkit.evaluation.evaluator", "deepecgkit.training.cross_validation"),
    }
)


def module_files(root: Path, packages: tuple[str, ...] = TOP_PACKAGES) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file of ``packages`` under ``root``."""
    modules: dict[str, Path] = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def _imported(module: str, path: Path, known: Mapping[str, Path]) -> Iterator[str]:
    """The modules of ours that ``module`` imports, anywhere in its file."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                yield candidate if candidate in known else base


def import_graph(root: Path, packages: tuple[str, ...] = TOP_PACKAGES) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports (deprecated edges left out)."""
    known = module_files(root, packages)
    graph: dict[str, set[str]] = {}
    for module, path in known.items():
        targets = {
            target
            for target in _imported(module, path, known)
            if target.split(".")[0] in packages and target != module
        }
        graph[module] = {t for t in targets if (module, t) not in DEPRECATED_EDGES}
    return graph


def package_of(module: str, allowed: Mapping[str, frozenset[str]]) -> str:
    """The longest key of ``allowed`` that is ``module`` or one of its parents."""
    parts = module.split(".")
    for size in range(len(parts), 0, -1):
        candidate = ".".join(parts[:size])
        if candidate in allowed:
            return candidate
    raise KeyError(f"{module} belongs to no package of the architecture table")


def direction_violations(
    graph: Mapping[str, set[str]], allowed: Mapping[str, frozenset[str]] = ALLOWED
) -> list[str]:
    """``importer -> imported`` for every import the table does not allow."""
    found = []
    for module, targets in sorted(graph.items()):
        own = package_of(module, allowed)
        for target in sorted(targets):
            other = package_of(target, allowed)
            if other != own and other not in allowed[own]:
                found.append(f"{module} -> {target} ({own} may not import {other})")
    return found


def import_cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def test_every_module_belongs_to_a_package_of_the_table() -> None:
    for module in module_files(REPOSITORY):
        package_of(module, ALLOWED)


def test_imports_follow_the_package_directions() -> None:
    assert direction_violations(import_graph(REPOSITORY)) == []


def test_no_import_cycles() -> None:
    assert import_cycles(import_graph(REPOSITORY)) == []


def consumer_writes(graph: Mapping[str, set[str]]) -> list[str]:
    """``importer -> module`` for every consumer module that imports the write side."""
    return [
        f"{module} -> {target}"
        for module, targets in sorted(graph.items())
        if any(module == consumer or module.startswith(f"{consumer}.") for consumer in CONSUMERS)
        for target in sorted(targets & WRITE_SIDE)
    ]


def test_consumers_do_not_import_the_run_directory_writers() -> None:
    assert consumer_writes(import_graph(REPOSITORY)) == []


def test_the_deprecated_edges_still_exist() -> None:
    """An exemption whose import is gone must leave the list with it."""
    known = module_files(REPOSITORY)
    for importer, imported in DEPRECATED_EDGES:
        assert imported in set(_imported(importer, known[importer], known))


# --- the checks catch what they are for -----------------------------------------------


def _plant(root: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.fixture
def scratch_tree(tmp_path: Path) -> Path:
    """A two-package tree: ``rundir`` imports ``analysis`` (forbidden), which imports it back."""
    _plant(
        tmp_path,
        {
            "deepecgkit/__init__.py": "",
            "deepecgkit/io.py": "",
            "deepecgkit/rundir/__init__.py": "",
            "deepecgkit/rundir/read.py": (
                "from deepecgkit.io import x\n"
                "def late():\n    from deepecgkit.analysis import aggregation\n"
            ),
            "deepecgkit/analysis/__init__.py": "",
            "deepecgkit/analysis/aggregation.py": "from ..rundir import read\n",
        },
    )
    return tmp_path


def test_a_forbidden_direction_is_reported(scratch_tree: Path) -> None:
    graph = import_graph(scratch_tree, ("deepecgkit",))
    assert graph["deepecgkit.rundir.read"] == {"deepecgkit.io", "deepecgkit.analysis.aggregation"}
    assert direction_violations(graph) == [
        "deepecgkit.rundir.read -> deepecgkit.analysis.aggregation "
        "(deepecgkit.rundir may not import deepecgkit.analysis)"
    ]


def test_a_consumer_that_writes_is_reported(tmp_path: Path) -> None:
    _plant(
        tmp_path,
        {
            "deepecgkit/__init__.py": "",
            "deepecgkit/rundir/__init__.py": "",
            "deepecgkit/rundir/write.py": "",
            "deepecgkit/analysis/__init__.py": "",
            "deepecgkit/analysis/aggregation.py": "from deepecgkit.rundir.write import f\n",
        },
    )
    graph = import_graph(tmp_path, ("deepecgkit",))
    assert consumer_writes(graph) == ["deepecgkit.analysis.aggregation -> deepecgkit.rundir.write"]


def test_a_cycle_is_reported(scratch_tree: Path) -> None:
    graph = import_graph(scratch_tree, ("deepecgkit",))
    assert graph["deepecgkit.analysis.aggregation"] == {"deepecgkit.rundir.read"}
    assert import_cycles(graph) == [["deepecgkit.analysis.aggregation", "deepecgkit.rundir.read"]]
