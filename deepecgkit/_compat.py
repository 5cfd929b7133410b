"""Old import paths of names that moved, kept working for one release with a warning.

A module whose names moved declares them in a ``__moved__`` table (name ->
the module that holds it now) and sets ``__getattr__ = moved_names(__name__,
__moved__)``. ``from old.module import name`` then still works, imports the
new home only at that moment (so an old path never creates an import cycle
at import time), and warns with a :class:`DeprecationWarning` naming the new
path. A package whose *modules* moved declares them in a ``__moved_modules__``
table (old submodule -> its new module) and calls :func:`moved_modules`:
``import old.package.module`` then still works, binds the new module under the
old name and warns. The tables are plain strings resolved only when an old
name is used, so they add no import edge (``tests/test_architecture.py``
checks the package directions of docs/architecture.md); they are removed in
deepecgkit 0.2.0.

The module imports nothing but the standard library.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

__all__ = ["REMOVED_IN", "moved_modules", "moved_names"]

#: The release that drops the old import paths.
REMOVED_IN = "0.2.0"


def moved_names(
    module: str, moved: Mapping[str, str], *, modules: Sequence[str] = ()
) -> Callable[[str], Any]:
    """A module ``__getattr__`` that serves the names of ``moved`` from their new modules.

    Args:
        module: the old module's ``__name__``.
        moved: name -> the module that now defines it.
        modules: new homes of old submodules whose every public name the old
            module re-exported; a name of their ``__all__`` is served from them.

    Returns:
        The ``__getattr__`` function; an unknown name raises ``AttributeError``
        as usual.
    """

    def _home(name: str) -> str | None:
        if name in moved:
            return moved[name]
        if name.startswith("__"):
            return None
        return next(
            (m for m in modules if name in getattr(importlib.import_module(m), "__all__", ())),
            None,
        )

    def __getattr__(name: str) -> Any:
        home = _home(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        _warn_old_path(f"{module}.{name}", f"{name} from {home}", stacklevel=3)
        return getattr(importlib.import_module(home), name)

    return __getattr__


def _warn_old_path(old: str, new: str, *, stacklevel: int) -> None:
    warnings.warn(
        f"{old} is an old import path: import {new} "
        f"(the old path is removed in deepecgkit {REMOVED_IN})",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


class _MovedModuleLoader(importlib.abc.Loader):
    """Loads an old module path as the module that now holds its code."""

    def __init__(self, new: str | Mapping[str, str]) -> None:
        self._new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        """The default placeholder module; :meth:`exec_module` replaces it."""
        return None

    def exec_module(self, module: ModuleType) -> None:
        """Bind the new module under the old name (the import system returns it).

        A module whose names went to several new modules stays a module of
        its own that serves each name from its new home (:func:`moved_names`).
        """
        if isinstance(self._new, str):
            _warn_old_path(module.__name__, self._new, stacklevel=5)
            sys.modules[module.__name__] = importlib.import_module(self._new)
            return
        module.__moved__ = dict(self._new)
        module.__all__ = sorted(self._new)
        module.__getattr__ = moved_names(module.__name__, self._new)


class _MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Finds the old module paths of one package (consulted after the real finders)."""

    def __init__(self, moved: Mapping[str, str | Mapping[str, str]]) -> None:
        self._moved = dict(moved)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = self._moved.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _MovedModuleLoader(new))


def moved_modules(package: str, moved: Mapping[str, str | Mapping[str, str]]) -> None:
    """Keep ``import package.old`` working for the submodules of ``moved``.

    Installs a finder after the standard ones, so a module that still exists
    is always imported from its file; an old path resolves to the new module
    object itself (``old is new``), with a :class:`DeprecationWarning`. An
    old module whose names were split over several modules maps to a table
    name -> new module instead, and each name warns when it is used.

    Args:
        package: the package's ``__name__``.
        moved: old submodule name (relative to ``package``) -> its new module,
            or -> a table name -> the module that now defines it.
    """
    full = {f"{package}.{old}": new for old, new in moved.items()}
    if not any(
        isinstance(finder, _MovedModuleFinder) and finder._moved == full for finder in sys.meta_path
    ):
        sys.meta_path.append(_MovedModuleFinder(full))
