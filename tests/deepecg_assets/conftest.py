"""Fixtures for the platform tests: a generated corpus, an output folder, a real instance.

The platform is configured exactly as in production, through the
``DEEPECG_*`` environment variables that its resources read with EnvVar.
The per-dataset assets are partitioned by dataset (see
:mod:`deepecg_assets.partitions`), so :meth:`Platform.build` does what the
build command does (a discovery run, the instance's partitions made to match
the datasets found, then one run over the whole partition range), and
:meth:`Platform.materialize` passes the partition range whenever its
selection holds a partitioned asset.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
)

from deepecg_assets.build import BuildResult, sync_dataset_partitions
from deepecg_assets.definitions import defs
from deepecg_assets.parquet_frames import read_stored_frame
from deepecg_assets.partitions import (
    DATASET_PARTITIONS,
    PARTITIONS_METADATA,
    PER_DATASET_ASSETS,
)
from deepecg_assets.sensors import DISCOVERY_ASSET
from deepecgkit.rundir.synthetic import example_spec, generate_corpus

#: Every asset of the definitions, by name.
ALL_ASSET_NAMES = tuple(
    sorted(key.to_user_string() for key in defs.resolve_asset_graph().get_all_asset_keys())
)


def partition_range_tags(keys: Sequence[str]) -> dict[str, str]:
    """The tags of a single run over the partitions ``keys`` (first to last, in instance order)."""
    return {ASSET_PARTITION_RANGE_START_TAG: keys[0], ASSET_PARTITION_RANGE_END_TAG: keys[-1]}


@dataclass
class Platform:
    """A configured platform: where its runs are, where it writes, its instance."""

    runs: Path
    output: Path
    instance: dg.DagsterInstance

    @property
    def frames_dir(self) -> Path:
        return self.output / "frames"

    def partitions(self) -> list[str]:
        """The dataset partitions the instance holds, in its order."""
        return list(self.instance.get_dynamic_partitions(DATASET_PARTITIONS))

    def materialize(
        self,
        selection: Iterable[str] | None = None,
        *,
        partitions: Sequence[str] | None = None,
        **kwargs,
    ) -> dg.ExecuteInProcessResult:
        """Run the global asset job in-process (optionally a subset), checks included.

        A selection holding a partitioned asset runs over the partition range
        ``partitions`` (first to last in the instance's order; every registered
        partition when omitted), as one single-run backfill, as the build does.
        ``None`` selects every asset. One per-dataset frame selects them all: they
        are computed in one step (``dataset_analysis``), which cannot be subset.
        """
        wanted = dg.AssetSelection.assets(*(ALL_ASSET_NAMES if selection is None else selection))
        graph = defs.resolve_asset_graph()
        keys = sorted(wanted.required_multi_asset_neighbors().resolve(graph))
        names = [key.to_user_string() for key in keys]
        job = defs.resolve_implicit_global_asset_job_def()
        tags = dict(kwargs.pop("tags", None) or {})
        if set(names) & set(PER_DATASET_ASSETS):
            chosen = list(partitions) if partitions is not None else self.partitions()
            assert chosen, "no dataset partition to materialise: build() or sync_partitions() first"
            tags |= partition_range_tags(chosen)
        return job.execute_in_process(
            instance=self.instance,
            asset_selection=keys,
            tags=tags or None,
            **kwargs,
        )

    def sync_partitions(self, result: dg.ExecuteInProcessResult) -> list[str]:
        """Make the instance's dataset partitions those a discovery run found (as the build)."""
        (event,) = result.asset_materializations_for_node(DISCOVERY_ASSET)
        keys = list(event.metadata[PARTITIONS_METADATA].value)
        return sync_dataset_partitions(self.instance, keys, frames_dir=self.frames_dir)

    def build(self, selection: Iterable[str] | None = None, **kwargs) -> BuildResult:
        """What the build command does, on this platform's instance: two runs.

        The first discovers the runs and the dataset partitions are synced to
        the datasets found (:func:`deepecg_assets.build.sync_dataset_partitions`);
        the second materialises ``selection`` (every other asset by default)
        over the whole partition range. ``kwargs`` go to both runs
        (``run_config``, ``raise_on_error``). When discovery fails the result
        holds that run only.
        """
        first = self.materialize([DISCOVERY_ASSET], **kwargs)
        result = BuildResult([first])
        if not first.success:
            return result
        keys = self.sync_partitions(first)
        names = [n for n in (selection or ALL_ASSET_NAMES) if n != DISCOVERY_ASSET]
        if not keys:
            names = [n for n in names if n not in PER_DATASET_ASSETS]
        if names:
            result.runs.append(self.materialize(names, partitions=keys, **kwargs))
        return result

    def frame(self, asset: str) -> pd.DataFrame:
        """The stored frame of ``asset`` (a partitioned one's partitions joined in key order)."""
        return read_stored_frame(self.frames_dir, asset)


#: The folders of a platform under its root: runs, output and the instance's home.
PLATFORM_FOLDERS = ("runs", "output", "dagster_home")


@contextmanager
def open_platform(root: Path, patch: pytest.MonkeyPatch) -> Iterator[Platform]:
    """The platform under ``root``, configured through ``patch``; its instance open.

    ``root/runs`` gets the generated demo grid unless it exists already (a
    copy of another platform's folders, :func:`copy_platform`).
    """
    runs, output, home = (root / name for name in PLATFORM_FOLDERS)
    if not runs.exists():
        generate_corpus(runs, example_spec())
    patch.setenv("DEEPECG_RUNS", str(runs))
    patch.setenv("DEEPECG_OUTPUT", str(output))
    patch.setenv("DEEPECG_RECURSIVE", "1")
    home.mkdir(exist_ok=True)
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        yield Platform(runs=runs, output=output, instance=instance)


def copy_platform(source: Path, destination: Path) -> Path:
    """Copy the folders of the (closed) platform under ``source`` to ``destination``.

    The copy's stored frames and instance (runs, events, dataset partitions)
    are those of the source, so a test that needs a built platform and then
    changes it starts from one build made once per module; the source's own
    paths inside stored records (run paths, the discovery cache's keys) are
    left as they were.
    """
    for name in PLATFORM_FOLDERS:
        if (source / name).exists():
            shutil.copytree(source / name, destination / name, symlinks=True)
    return destination


@pytest.fixture
def platform(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Platform]:
    with open_platform(tmp_path, monkeypatch) as configured:
        yield configured


#: A test module's run config for :func:`built_platform` (a module attribute; none by default).
BUILT_PLATFORM_RUN_CONFIG = "BUILT_PLATFORM_RUN_CONFIG"


@dataclass(frozen=True)
class BuiltPlatform:
    """A platform built once for a test module: read it, or open a copy to change it."""

    root: Path
    #: Its instance is closed after the build: read frames and folders through it.
    platform: Platform
    result: BuildResult
    #: The dataset partitions the instance held after the build.
    partitions: list[str]


@pytest.fixture(scope="module")
def built_platform(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> BuiltPlatform:
    """:meth:`Platform.build` of every asset on the demo grid, once per test module.

    Several tests assert different things about one full build; building it
    once per module instead of once per test is most of those tests' time.
    The run config is the module's ``BUILT_PLATFORM_RUN_CONFIG`` (none when
    absent). The environment is set only while the build runs. A test that
    changes the platform opens a copy (:func:`platform_copy`), never this one.
    """
    root = tmp_path_factory.mktemp("built-platform")
    run_config = getattr(request.module, BUILT_PLATFORM_RUN_CONFIG, None) or {}
    with pytest.MonkeyPatch.context() as patch, open_platform(root, patch) as platform:
        result = platform.build(run_config=run_config)
        partitions = platform.partitions()
    return BuiltPlatform(root=root, platform=platform, result=result, partitions=partitions)


@pytest.fixture
def platform_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[BuiltPlatform], Platform]]:
    """Open a copy of a :class:`BuiltPlatform` as this test's platform (its instance open)."""
    with ExitStack() as stack:

        def open_copy(built: BuiltPlatform) -> Platform:
            root = copy_platform(built.root, tmp_path / "copy")
            return stack.enter_context(open_platform(root, monkeypatch))

        yield open_copy
