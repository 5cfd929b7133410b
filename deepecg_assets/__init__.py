"""deepecg_assets: the Dagster code location over deepecgkit's analysis.

Load ``deepecg_assets.definitions:defs``. The library does the work; this
package only wires it into assets, checks, a sensor and a schedule.
"""

import warnings

# Two Dagster features this location relies on are marked beta or preview: the
# single-run backfill policy of the per-dataset assets and the partitions of
# their checks (deepecg_assets.partitions). Dagster warns at every import of the
# definitions; the notices are about Dagster's API, not about a user's runs, and
# would otherwise be the first lines every command prints.
warnings.filterwarnings("ignore", message=r"Parameter `backfill_policy` of function `asset`")
warnings.filterwarnings("ignore", message=r"Parameter `backfill_policy` of function `multi_asset`")
warnings.filterwarnings("ignore", message=r"Specifying a partitions_def on an AssetCheckSpec")
warnings.filterwarnings("ignore", message=r"Parameter `partitions_def` of function `asset_check`")
