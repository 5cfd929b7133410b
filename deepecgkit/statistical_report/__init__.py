"""The statistical report: group-bootstrap tables, figures and a manifest from run folders.

The pipeline behind ``deepecg report`` and the Dagster asset
``statistical_report``. It reads run directories through
:mod:`deepecgkit.rundir.read`, checks each run against the identity contract
(:mod:`~deepecgkit.statistical_report.identity`), scores runs and pairs with
the statistics of :mod:`deepecgkit.analysis.compare`
(:mod:`~deepecgkit.statistical_report.tables`), draws reliability diagrams
(:mod:`~deepecgkit.statistical_report.reliability_plot`) and writes the report
and its manifest (:mod:`~deepecgkit.statistical_report.report`,
:mod:`~deepecgkit.statistical_report.manifest`);
:mod:`~deepecgkit.statistical_report.cli` is the command. Nothing here
imports torch or Dagster, and matplotlib only when a figure is drawn.
"""

from deepecgkit.statistical_report.report import OUTPUT_FILES, ReportResult, statistical_report

__all__ = ["OUTPUT_FILES", "ReportResult", "statistical_report"]
