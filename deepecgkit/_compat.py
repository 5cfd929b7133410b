"""Old import paths of names that moved, kept working for one release with a warning.

A module whose names moved declares them in a ``__moved__`` table (name ->
the module that holds it now) and sets ``__getattr__ = moved_names(__name__,
__moved__)``. ``from old.module import name`` then still works, imports the
new home only at that moment (so an old path never creates an import cycle
at import time), and warns with a :class:`DeprecationWarning` naming the new
path. The tables are plain literals, so the architecture test reads them as
the only import edges allowed to point against the package directions
(docs/architecture.md); they are removed in the release after 0.1.

The module imports nothing but the standard library.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["REMOVED_IN", "moved_names"]

#: The release that drops the old import paths.
REMOVED_IN = "0.2.0"


def moved_names(module: str, moved: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that serves the names of ``moved`` from their new modules.

    Args:
        module: the old module's ``__name__``.
        moved: name -> the module that now defines it.

    Returns:
        The ``__getattr__`` function; an unknown name raises ``AttributeError``
        as usual.
    """

    def __getattr__(name: str) -> Any:
        home = moved.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(
            f"{module}.{name} is an old import path: import {name} from {home} "
            f"(the old path is removed in deepecgkit {REMOVED_IN})",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(home), name)

    return __getattr__
