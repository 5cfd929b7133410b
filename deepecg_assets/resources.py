"""Resources: where the runs are, where results go, and the analysis settings.

Locations come from the environment through Dagster's :class:`~dagster.EnvVar`
(read when a run or tick uses the resource, never at import time):

=====================  =============================  ====================================
variable               default                        meaning
=====================  =============================  ====================================
``DEEPECG_RUNS``       the bundled example corpus     run roots separated by ``os.pathsep``
``DEEPECG_OUTPUT``     ``./deepecg_output``           frames, tables and figures (a path
                                                     or a ``file://`` URL)
``DEEPECG_RECURSIVE``  ``1``                          search roots at any depth
=====================  =============================  ====================================

A field set explicitly (in tests, or in the launchpad's ``resources``
section) wins over the environment. The analysis settings are ordinary run
configuration with the defaults of :mod:`deepecgkit.analysis.constants`. The
default resources of the code location are built in ``definitions.py``.
"""

import os
from collections.abc import Collection
from pathlib import Path
from urllib.parse import unquote, urlsplit

import dagster as dg
import pandas as pd
from pydantic import Field, field_validator

from deepecgkit._compat import moved_names
from deepecgkit.analysis.constants import (
    CONFIDENCE_LEVEL,
    CORRECTIONS,
    DEFAULT_FDR_METHOD,
    DEFAULT_RANK_METRIC,
    FDR_FAMILIES,
    FDR_FAMILY_TESTABLE,
    FDR_METHODS,
    MIN_TEST_GROUPS,
    NADEAU_BENGIO,
)
from deepecgkit.rundir.metrics import unaliased
from deepecgkit.rundir.read import ON_DUPLICATE_NEWEST, ON_DUPLICATE_POLICIES

#: Environment variables read by the resources.
RUNS_ENV = "DEEPECG_RUNS"
OUTPUT_ENV = "DEEPECG_OUTPUT"
RECURSIVE_ENV = "DEEPECG_RECURSIVE"
#: Output folder when ``DEEPECG_OUTPUT`` is unset (relative to the working directory).
DEFAULT_OUTPUT = "deepecg_output"
#: The example corpus shipped inside the package.
BUNDLED_CORPUS = Path(__file__).resolve().parent / "example_corpus"
#: Values of ``DEEPECG_RECURSIVE`` that mean "no".
_FALSE_WORDS = frozenset({"0", "false", "no", "off"})
#: The one URL scheme an output folder may be given as (shared storage mounted on every worker).
FILE_URL_SCHEME = "file"


def local_folder(text: str) -> Path:
    """The folder that ``text`` names: a path, or a ``file://`` URL of a local or mounted one.

    A distributed deployment names its shared storage by URL
    (``file:///shared/deepecg_output``), the form object-storage base paths
    take too; the frames are plain files, so only ``file://`` is accepted.

    Raises:
        ValueError: another scheme (``s3://...``), or a ``file://`` URL naming a host.
    """
    if "://" not in text:
        return Path(text).expanduser()
    parts = urlsplit(text)
    if parts.scheme != FILE_URL_SCHEME:
        raise ValueError(
            f"output folder {text!r}: {parts.scheme}:// is not supported; give a folder "
            f"path or a {FILE_URL_SCHEME}:// URL of storage that every worker mounts"
        )
    if parts.netloc not in ("", "localhost"):
        raise ValueError(
            f"output folder {text!r} names host {parts.netloc!r}; mount the share and give "
            f"{FILE_URL_SCHEME}:///<mount point>/... (three slashes) instead"
        )
    return Path(unquote(parts.path))


class RunRootError(ValueError):
    """A configured run root is missing, not a folder, or cannot be read."""


def _check_root(root: Path) -> None:
    """Raise :class:`RunRootError` with one clear sentence when ``root`` is unusable."""
    if not root.exists():
        raise RunRootError(f"run root {root} does not exist")
    if not root.is_dir():
        raise RunRootError(f"run root {root} is a file, not a folder of run directories")
    try:
        with os.scandir(root) as entries:
            next(entries, None)
    except PermissionError:
        raise RunRootError(f"run root {root} cannot be read: permission denied") from None
    except OSError as exc:
        raise RunRootError(f"run root {root} cannot be read: {exc.strerror}") from None


class RunRootsResource(dg.ConfigurableResource):
    """The folders searched for run directories."""

    roots: str | None = Field(
        default=None,
        description=(
            f"Run roots separated by os.pathsep; unset means ${RUNS_ENV}, "
            "or the bundled example corpus when that is unset too."
        ),
    )
    recursive: bool | None = Field(
        default=None,
        description=f"Search roots at any depth; unset means ${RECURSIVE_ENV} (default 1).",
    )

    def root_paths(self) -> list[Path]:
        """The configured roots, without checking them (empty parts are skipped)."""
        text = self._roots_text()
        if not text:
            return [BUNDLED_CORPUS]
        return [Path(part).expanduser() for part in text.split(os.pathsep) if part]

    def _roots_text(self) -> str | None:
        return self.roots if self.roots is not None else dg.EnvVar(RUNS_ENV).get_value()

    def checked_roots(self) -> list[Path]:
        """The roots, each verified to be a readable folder.

        Raises:
            RunRootError: naming the first unusable root and why, or saying
                that the setting names no root at all (``DEEPECG_RUNS=:``):
                an empty analysis would otherwise look like a corpus without runs.
        """
        roots = self.root_paths()
        if not roots:
            source = "the roots setting" if self.roots is not None else f"${RUNS_ENV}"
            raise RunRootError(
                f"{source} ({self._roots_text()!r}) names no run root; give one or more "
                f"folders separated by {os.pathsep!r}, or leave it unset for the example corpus"
            )
        for root in roots:
            _check_root(root)
        return roots

    def is_recursive(self) -> bool:
        if self.recursive is not None:
            return self.recursive
        text = dg.EnvVar(RECURSIVE_ENV).get_value("1") or "1"
        return text.strip().lower() not in _FALSE_WORDS


#: File name of the run cache under ``<output>/cache``.
RUN_CACHE_NAME = "run_records.cache"
#: Its name before the cache was columnar (JSON lines, 120 MB at 100,000 runs): discovery
#: removes such a file once it has saved the new one, so an upgrade leaves no stale copy.
LEGACY_RUN_CACHE_NAME = "run_records.jsonl"


class OutputFolderResource(dg.ConfigurableResource):
    """Where frames (``frames/``), tables (``tables/``) and caches (``cache/``) are written."""

    path: str | None = Field(
        default=None,
        description=f"Output folder; unset means ${OUTPUT_ENV}, else ./{DEFAULT_OUTPUT}.",
    )

    def root(self) -> Path:
        text = self.path if self.path is not None else dg.EnvVar(OUTPUT_ENV).get_value()
        return local_folder(text or DEFAULT_OUTPUT)

    def frames_dir(self) -> Path:
        return self.root() / "frames"

    def tables_dir(self) -> Path:
        return self.root() / "tables"

    def cache_file(self) -> Path:
        """The run cache (:mod:`deepecgkit.rundir.cache`: a header line, then Parquet)."""
        return self.root() / "cache" / RUN_CACHE_NAME

    def legacy_cache_file(self) -> Path:
        """Where the run cache lived in its JSON-lines format (removed by discovery)."""
        return self.cache_file().with_name(LEGACY_RUN_CACHE_NAME)

    def tree_index_file(self) -> Path:
        """The sensor's index of the run roots (:mod:`deepecgkit.rundir.tree_index`)."""
        return self.cache_file().with_name("tree_index.json")


class ClaimConfig(dg.Config):
    """One rank claim: ``model`` is best on ``dataset_best`` and worst on ``dataset_worst``."""

    model: str
    dataset_best: str
    dataset_worst: str
    opponents: list[str] | None = None


class AnalysisSettings(dg.ConfigurableResource):
    """Analysis settings shared by every asset, so tables and frames always agree."""

    metric: str = Field(default=DEFAULT_RANK_METRIC, description="metric ranked and compared")
    confidence_level: float = Field(
        default=CONFIDENCE_LEVEL, gt=0.0, lt=1.0, description="two-sided coverage"
    )
    correction: str = Field(default=NADEAU_BENGIO, description="'nadeau-bengio' or 'none'")
    fdr_family: str = Field(default=FDR_FAMILY_TESTABLE, description="'testable' or 'significant'")
    fdr_method: str = Field(
        default=DEFAULT_FDR_METHOD,
        description="adjustment of q_reversal: 'by' (Benjamini-Yekutieli) or 'bh'",
    )
    strict_correction: bool = Field(
        default=False,
        description="flip rows whose Nadeau-Bengio correction is unavailable become untestable",
    )
    models: list[str] | None = Field(default=None, description="restrict to these models")
    datasets: list[str] | None = Field(default=None, description="restrict to these datasets")
    on_duplicate: str = Field(default=ON_DUPLICATE_NEWEST, description="newest, error or all")
    include_legacy: bool = Field(default=False, description="keep runs without a seed")
    include_failed: bool = Field(default=False, description="keep runs with a non-zero returncode")
    min_test_groups: int = Field(default=MIN_TEST_GROUPS, ge=0)
    claims: list[ClaimConfig] = Field(default_factory=list, description="rank claims to evaluate")

    @field_validator("metric")
    @classmethod
    def _canonical_metric(cls, metric: str) -> str:
        """Aliases are accepted on input (``auc`` for ``auroc``); the assets use the name."""
        return unaliased(metric)

    def checked(self) -> "AnalysisSettings":
        """These settings, after checking every choice; ``dagster.Failure`` naming the allowed ones.

        The CLI rejects a bad ``--correction`` or ``--on-duplicate`` before it
        reads a run; the platform does the same here, so that a typo in the
        launchpad fails the step with one sentence instead of building empty
        or silently different tables.
        """
        for name, value, allowed in (
            ("correction", self.correction, CORRECTIONS),
            ("fdr_family", self.fdr_family, FDR_FAMILIES),
            ("fdr_method", self.fdr_method, FDR_METHODS),
            ("on_duplicate", self.on_duplicate, ON_DUPLICATE_POLICIES),
        ):
            if value not in allowed:
                raise dg.Failure(
                    description=(
                        f"analysis config {name}: {value!r} is not allowed; "
                        f"choose one of {', '.join(allowed)}"
                    )
                )
        return self

    def check_selection(self, runs: pd.DataFrame) -> None:
        """:meth:`check_names` against the names in a long runs frame.

        Args:
            runs: the long runs frame (``model``, ``dataset``, ``metric`` columns).
        """
        if runs.empty:
            self.checked()
            return
        self.check_names(
            **{f"{key}s": set(runs[key].astype(str)) for key in ("metric", "model", "dataset")}
        )

    def check_names(
        self, *, metrics: Collection[str], models: set[str], datasets: set[str]
    ) -> None:
        """Check ``metric``, ``models``, ``datasets`` and the claims against the runs' names.

        Args:
            metrics, models, datasets: the names the runs hold.

        Raises:
            dagster.Failure: a metric no run reports, or a model or dataset
                name that matches no run, naming what the runs do hold. Every
                unknown name fails, not only a selection that matches nothing:
                a typo in one of three models would otherwise silently drop it
                from every table. An empty corpus is not checked (there is
                nothing to check against; the rank check reports it).
        """
        self.checked()
        if not models:
            return
        present = {"metric": metrics, "model": models, "dataset": datasets}
        if self.metric not in present["metric"]:
            raise dg.Failure(
                description=(
                    f"analysis config metric: no run reports {self.metric!r}; metrics in the "
                    f"runs: {', '.join(sorted(present['metric']))}"
                )
            )
        named = [("models", "model", self.models), ("datasets", "dataset", self.datasets)]
        for claim in self.claims:
            named += [
                ("claims model", "model", [claim.model, *(claim.opponents or [])]),
                ("claims dataset", "dataset", [claim.dataset_best, claim.dataset_worst]),
            ]
        for setting, column, names in named:
            unknown = [name for name in names or [] if name not in present[column]]
            if unknown:
                raise dg.Failure(
                    description=(
                        f"analysis config {setting}: {', '.join(map(repr, unknown))} match(es) "
                        f"no run; {column}s in the runs: {', '.join(sorted(present[column]))}"
                    )
                )

    def exclusions(self) -> list[str]:
        """The restrictions as the flip table prints them."""
        notes = []
        if self.models:
            notes.append("models: " + ", ".join(self.models))
        if self.datasets:
            notes.append("datasets: " + ", ".join(self.datasets))
        return notes


#: Names that moved (old import paths, one release): the location's default resources
#: are built where the location is put together.
__moved__ = {"default_resources": "deepecg_assets.definitions"}
__getattr__ = moved_names(__name__, __moved__)
