"""``scripts/asset_graph_browser.py`` as a module, for the tests that drive the Dagster UI.

Imported once and shared by every test module that serves the UI or opens it
in Chromium.
"""

from __future__ import annotations

from tests.script_modules import SCRIPTS, import_script

HELPER_PATH = SCRIPTS / "asset_graph_browser.py"

browser = import_script(HELPER_PATH)
