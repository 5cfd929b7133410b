"""Every asset of the platform, gathered from the modules that define them, by group.

``discovery`` (which runs exist), the per-dataset frames (``datasets``: runs,
reconciliation, aggregates, ranks, tau, paired differences; partitioned by
dataset), ``analysis`` (the cross-dataset flip grid and claims),
``tables`` (the ``.tex`` files), ``report`` (the statistical report) and
``transfer`` (linear-probe transfer matrices). The list is derived from the
modules, so an asset defined in one of them is part of the location.
"""

import dagster as dg

from deepecg_assets.assets import analysis, datasets, discovery, report, tables, transfer

#: The asset modules, upstream first.
ASSET_MODULES = (discovery, datasets, analysis, tables, report, transfer)
ALL_ASSETS = list(dg.load_assets_from_modules(list(ASSET_MODULES)))

__all__ = ["ALL_ASSETS", "ASSET_MODULES"]
