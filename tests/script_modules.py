"""The repository's scripts as modules, for the tests that call their functions.

``scripts/`` is not a package, so a test imports a script from its path, once
per process, under the script's own name.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

#: The repository's ``scripts/`` folder.
SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def import_script(path: Path) -> ModuleType:
    """The script at ``path`` as a module named after its stem (imported once)."""
    name = path.stem
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered before running it: dataclasses look their module up by name.
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
