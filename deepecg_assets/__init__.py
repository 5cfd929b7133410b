"""deepecg_assets: the Dagster code location over deepecgkit's analysis.

Load ``deepecg_assets.definitions:defs``. The library does the work; this
package only wires it into assets, checks, a sensor and a schedule.
"""
