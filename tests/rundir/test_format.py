"""The run-directory format module: its page is current and its owners exist."""

from __future__ import annotations

import importlib
import runpy
from pathlib import Path

from deepecgkit.rundir import format as fmt

REPOSITORY = Path(__file__).resolve().parents[2]
SCRIPT = REPOSITORY / "scripts" / "make_run_directory_doc.py"


def _resolve(dotted: str) -> object:
    """``pkg.module.function`` or ``pkg.module.Class.method`` -> the object."""
    parts = dotted.split(".")
    for split in range(len(parts) - 1, 0, -1):
        try:
            target: object = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[split:]:
            target = getattr(target, attribute)
        return target
    raise ModuleNotFoundError(dotted)


def test_the_committed_page_is_what_the_script_writes() -> None:
    render = runpy.run_path(str(SCRIPT))["render"]
    committed = (REPOSITORY / "docs" / "run-directory.md").read_text(encoding="utf-8")
    assert committed == render(), "run python scripts/make_run_directory_doc.py"


def test_every_writer_and_reader_named_exists() -> None:
    for run_file in fmt.RUN_FILES:
        for owner in (*run_file.writers, *run_file.readers):
            assert callable(_resolve(owner)), owner


def test_every_file_name_constant_has_a_schema() -> None:
    described = {run_file.name for run_file in fmt.RUN_FILES}
    names = {value for key, value in vars(fmt).items() if key.endswith("_FILENAME")}
    assert names == described
