"""Asset checks: what a person should look at before trusting a table.

Severities: data-quality findings (dropped averaging minorities, bimodal
cells, untestable flips, transfer cells without a score) are WARN, because
the analysis handles them honestly and reports them; a ``.tex`` file that
does not compile, and a selection that leaves nothing to rank, are ERROR,
because they would break the paper's build or empty every table.

Most checks live with the asset they check, evaluated by the step that
computes it on what it has just made, instead of a check step reading it
back (a step of its own costs a one-run refresh its Dagster events and an
input load per check):

- the check for unreadable or failed runs with ``discovered_runs``, which
  holds the diagnostics;
- the per-dataset checks (dropped averaging minorities, bimodal cells) with
  ``dataset_analysis`` (:mod:`deepecg_assets.assets.datasets`), partitioned
  by dataset like their assets, so a run of one dataset's partition (the run
  sensor's refresh) checks that dataset's frames only and does not fail on a
  dataset not built yet;
- the flip grid's checks with ``flip_grid``
  (:mod:`deepecg_assets.assets.analysis`; its 232,750 rows at 100,000 runs);
- the compile checks of the rank, tau, flip and transfer tables, and the
  check that the selection leaves something to rank, with the table assets
  (:mod:`deepecg_assets.assets.tables`, :mod:`deepecg_assets.assets.transfer`),
  and the check that every transfer cell has a score with ``transfer_matrix``.

The check here reads stored tables: the results tables' compile check is
partitioned by dataset, as a check of its own, so that each dataset's
verdict is recorded against its partition.
"""

import dagster as dg
import pandas as pd

from deepecg_assets.assets.tables import compile_check, results_table_stem, table_paths
from deepecg_assets.partitions import DATASETS
from deepecg_assets.resources import OutputFolderResource


@dg.asset_check(
    asset="results_tables",
    additional_ins={"aggregates": dg.AssetIn()},
    partitions_def=DATASETS,
    description=(
        "Every results table compiles with pdflatex in a minimal document. A failure means "
        "\\input of that table would break the paper's build."
    ),
)
def results_tables_compile(
    aggregates: dict[str, pd.DataFrame], output_folder: OutputFolderResource
) -> dg.AssetCheckResult:
    """The results tables of the datasets of this run (one, or all of them in a build)."""
    stems = [results_table_stem(key) for key, frame in sorted(aggregates.items()) if len(frame)]
    return compile_check(table_paths(output_folder, stems), output_folder)


ALL_CHECKS = [results_tables_compile]
