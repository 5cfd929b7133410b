"""Fixtures for the platform tests: a generated corpus, an output folder, a real instance.

The platform is configured exactly as in production, through the
``DEEPECG_*`` environment variables that its resources read with EnvVar.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from deepecg_assets.definitions import defs
from deepecgkit.rundir.synthetic import example_spec, generate_corpus


@dataclass
class Platform:
    """A configured platform: where its runs are, where it writes, its instance."""

    runs: Path
    output: Path
    instance: dg.DagsterInstance

    def materialize(
        self, selection: list[str] | None = None, **kwargs
    ) -> dg.ExecuteInProcessResult:
        """Run the global asset job in-process (optionally a subset), checks included."""
        job = defs.resolve_implicit_global_asset_job_def()
        keys = None if selection is None else [dg.AssetKey(name) for name in selection]
        return job.execute_in_process(instance=self.instance, asset_selection=keys, **kwargs)

    def frame_text(self, asset: str) -> str:
        return (self.output / "frames" / f"{asset}.csv").read_text(encoding="utf-8")


@pytest.fixture
def platform(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Platform]:
    runs, output = tmp_path / "runs", tmp_path / "output"
    generate_corpus(runs, example_spec())
    monkeypatch.setenv("DEEPECG_RUNS", str(runs))
    monkeypatch.setenv("DEEPECG_OUTPUT", str(output))
    monkeypatch.setenv("DEEPECG_RECURSIVE", "1")
    home = tmp_path / "dagster_home"
    home.mkdir()
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        yield Platform(runs=runs, output=output, instance=instance)
