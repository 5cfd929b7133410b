"""What a platform test reads from a run's events (one in-process run, or both runs of a build)."""

from __future__ import annotations

import dagster as dg

from deepecg_assets.build import BuildResult


def _runs(result: dg.ExecuteInProcessResult | BuildResult) -> list[dg.ExecuteInProcessResult]:
    return result.runs if isinstance(result, BuildResult) else [result]


def materialized_keys(result: dg.ExecuteInProcessResult | BuildResult) -> set[str]:
    """The names of the assets ``result`` materialised (a run, or both runs of a build)."""
    return {
        event.asset_key.to_user_string()
        for run in _runs(result)
        for event in run.get_asset_materialization_events()
    }


def materializations(
    result: dg.ExecuteInProcessResult | BuildResult,
) -> dict[str, dict[str, dg.MetadataValue]]:
    """The metadata of each asset's last materialisation in ``result``, by asset name."""
    return {
        event.asset_key.to_user_string(): event.materialization.metadata
        for run in _runs(result)
        for event in run.get_asset_materialization_events()
    }


def check_evaluations(result: dg.ExecuteInProcessResult | BuildResult) -> dict[str, object]:
    """The asset check evaluations of ``result``, by check name."""
    return {
        event.event_specific_data.check_name: event.event_specific_data
        for run in _runs(result)
        for event in run.all_events
        if event.event_type_value == "ASSET_CHECK_EVALUATION"
    }
