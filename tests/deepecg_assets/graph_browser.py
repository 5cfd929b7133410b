"""``scripts/asset_graph_browser.py`` as a module, for the tests that drive the Dagster UI.

The script is not in a package, so it is imported from its path once and
shared by every test module that serves the UI or opens it in Chromium.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

HELPER_PATH = Path(__file__).resolve().parents[2] / "scripts" / "asset_graph_browser.py"


def _load_helper() -> ModuleType:
    """Import ``scripts/asset_graph_browser.py``, which is not in a package."""
    name = "asset_graph_browser"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, HELPER_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered before running it: dataclasses look their module up by name.
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


browser = _load_helper()
