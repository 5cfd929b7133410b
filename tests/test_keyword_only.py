"""Options are keyword-only: the calling convention of STYLE.md, checked by parsing.

Every public function and method of ``deepecgkit`` and ``deepecg_assets``
(its name does not start with ``_``; dunder methods are left out) with three
or more parameters, not counting ``self``/``cls``, must take its options after
a bare ``*``::

    def expected_calibration_error(y_true, y_prob, *, n_bins=15, task=None): ...

What stays positional is the *data*: the frame, arrays, paths or identifiers
the function operates on, in the order a reader expects them --
``(y_true, y_prob)``, ``(y_true, y_prob, groups)``, ``(logits, temperature)``,
``(runs, model_a, model_b, dataset)``. Everything that tunes *how* the work is
done (counts, levels, seeds, flags, names, paths to write to) is an option.
Two rules follow, both checked here:

* a function with three or more parameters has a keyword-only marker
  (``*`` or ``*args``), unless it is listed in ``ALL_DATA`` (every parameter
  is data, so there is nothing to put after a ``*``);
* it takes at most ``MAX_DATA_PARAMETERS`` positional parameters, unless it is
  listed in ``WIDER_DATA`` with the reason its data is wider (a contrast of
  two models on two datasets names five things).

Left out: Dagster asset, asset-check, op and sensor functions (Dagster passes
their parameters by name), methods whose signature a framework base class
fixes (``FRAMEWORK_SIGNATURES``), and the CLI's ``main(argv)``. The files are
parsed, not imported, so a module that fails to import is still checked. The
last tests plant offenders in a scratch tree and show they are caught.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
PACKAGES = ("deepecgkit", "deepecg_assets")
#: From this many parameters (``self``/``cls`` not counted) options must be keyword-only.
MIN_PARAMETERS = 3
#: The most positional (data) parameters a function takes unless ``WIDER_DATA`` says why.
MAX_DATA_PARAMETERS = 3
#: Decorators whose functions Dagster calls with parameters by name.
DAGSTER_DECORATORS = frozenset(
    {
        "asset",
        "multi_asset",
        "asset_check",
        "multi_asset_check",
        "op",
        "graph",
        "sensor",
        "schedule",
    }
)
_LABELS_PROBS_GROUPS = "labels, probabilities and their groups"
#: Qualified name -> why every parameter is data (no option to put after ``*``).
ALL_DATA: dict[str, str] = {
    "deepecgkit.analysis.compare.groups.validate_predictions": _LABELS_PROBS_GROUPS,
    "deepecgkit.analysis.compare.groups.aggregate_groups": _LABELS_PROBS_GROUPS,
    "deepecgkit.analysis.compare.information.information_of": (
        "the metric whose information is measured, on labels and probabilities"
    ),
    "deepecgkit.rundir.listing.listing_signature": (
        "what one directory listing held: its kind, metrics file, subdirectories and links"
    ),
    "deepecgkit.rundir.listing.ListingRecord.add": (
        "one listed directory: its path, the time it was read and what it held"
    ),
}
#: Qualified name -> (positional parameters, why the data is that wide).
WIDER_DATA: dict[str, tuple[int, str]] = {
    "deepecgkit.analysis.compare.bootstrap.cluster_bootstrap_difference": (
        4,
        "labels, the two models' probabilities and the groups",
    ),
    "deepecgkit.analysis.ranking.paired_difference": (
        4,
        "runs and the contrast: two models, one dataset",
    ),
    "deepecgkit.analysis.ranking.flip_test": (5, "runs and the contrast: two models, two datasets"),
    "deepecgkit.analysis.ranking.evaluate_rank_claim": (
        4,
        "runs and the claim: one model, two datasets",
    ),
    "deepecgkit.training.grid.run_grid": (4, "the grid's three axes and the directory it fills"),
}
#: Methods whose signature a framework's base class fixes, with the base.
FRAMEWORK_SIGNATURES: dict[str, str] = {
    "deepecg_assets.parquet_frames.ParquetFrameIOManager.dump_to_path": (
        "dagster.UPathIOManager.dump_to_path"
    ),
}
#: Entry points called with one argument vector.
ENTRY_POINTS = frozenset({"deepecgkit.cli.main"})


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_dagster_function(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in DAGSTER_DECORATORS:
            return True
    return False


def public_functions(root: Path) -> Iterator[tuple[str, ast.arguments, bool]]:
    """Yield (qualified name, arguments, is_method) of every public function under ``root``.

    Module-level functions and methods of public classes (nested classes
    included); functions defined inside functions are private by nature and
    skipped, as are names starting with ``_`` and Dagster-decorated functions.
    """
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            module = _module_name(path, root)
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            stack: list[tuple[ast.AST, str, bool]] = [(tree, module, False)]
            while stack:
                node, prefix, in_class = stack.pop()
                for child in ast.iter_child_nodes(node):
                    if getattr(child, "name", "").startswith("_"):
                        continue
                    if isinstance(child, ast.ClassDef):
                        stack.append((child, f"{prefix}.{child.name}", True))
                    elif isinstance(
                        child, ast.FunctionDef | ast.AsyncFunctionDef
                    ) and not _is_dagster_function(child):
                        yield f"{prefix}.{child.name}", child.args, in_class


def _positional(arguments: ast.arguments, is_method: bool) -> list[str]:
    names = [argument.arg for argument in arguments.posonlyargs + arguments.args]
    if is_method and names and names[0] in {"self", "cls"}:
        names = names[1:]
    return names


def violations(root: Path) -> list[str]:
    """One line per public function that breaks either rule, naming it and its signature."""
    found = []
    for name, arguments, is_method in public_functions(root):
        if name in FRAMEWORK_SIGNATURES or name in ENTRY_POINTS:
            continue
        positional = _positional(arguments, is_method)
        n_parameters = len(positional) + len(arguments.kwonlyargs)
        if n_parameters < MIN_PARAMETERS:
            continue
        signature = f"{name}({', '.join(positional)}{', *, ...' if arguments.kwonlyargs else ''})"
        has_marker = bool(arguments.kwonlyargs) or arguments.vararg is not None
        if not has_marker and name not in ALL_DATA:
            found.append(f"{signature}: no keyword-only marker")
            continue
        allowed = WIDER_DATA.get(name, (MAX_DATA_PARAMETERS, ""))[0]
        if has_marker and len(positional) > allowed:
            found.append(f"{signature}: {len(positional)} positional parameters, at most {allowed}")
    return found


def test_options_are_keyword_only() -> None:
    found = violations(REPOSITORY)
    assert not found, "options must follow a bare `*` (tests/test_keyword_only.py):\n" + "\n".join(
        found
    )


def test_listed_exceptions_exist() -> None:
    # A stale entry would silently excuse a future function of the same name.
    names = {name for name, _, _ in public_functions(REPOSITORY)}
    listed = set(ALL_DATA) | set(WIDER_DATA) | set(FRAMEWORK_SIGNATURES) | ENTRY_POINTS
    assert listed <= names, f"listed but not found: {sorted(listed - names)}"


def _plant(root: Path, source: str) -> None:
    package = root / "deepecgkit"
    package.mkdir(parents=True)
    (package / "planted.py").write_text(source, encoding="utf-8")
    (root / "deepecg_assets").mkdir()


def test_planted_offenders_are_caught(tmp_path: Path) -> None:
    _plant(
        tmp_path,
        "def no_marker(y_true, y_prob, n_bins): ...\n"
        "def too_wide(a, b, c, d, *, e): ...\n"
        "class Public:\n"
        "    def method(self, x, n, seed): ...\n"
        "    def fine(self, x, *, n, seed): ...\n"
        "    def __init__(self, a, b, c): ...\n"
        "def _private(a, b, c): ...\n"
        "def two(a, b): ...\n"
        "def shim(*args, **kwargs): ...\n"
        "@dg.asset(group_name='g')\n"
        "def an_asset(context, a, b): ...\n",
    )
    found = violations(tmp_path)
    assert found == [
        "deepecgkit.planted.no_marker(y_true, y_prob, n_bins): no keyword-only marker",
        "deepecgkit.planted.too_wide(a, b, c, d, *, ...): 4 positional parameters, at most 3",
        "deepecgkit.planted.Public.method(x, n, seed): no keyword-only marker",
    ]
