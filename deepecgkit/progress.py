"""Progress of long loops, as log records a front end may show.

Library code never prints (the house rules); a loop whose length grows with
the corpus (reading run directories, bootstrapping runs, drawing figures)
instead logs how far it got, at most :data:`PROGRESS_STEPS` times per loop,
through the module's own logger. A command line decides what to show: the
build entry point (``python -m deepecg_assets.build``) prints these records
as progress lines; a library user sees them only when they configure
``logging``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import TypeVar

__all__ = ["PROGRESS_ATTRIBUTE", "PROGRESS_STEPS", "logged_progress"]

#: Records per loop at most: one per tenth of the work.
PROGRESS_STEPS = 10
#: Attribute of each progress record holding ``(what, done, total)``, for a front end
#: that shows progress its own way (a bar, an updating line, fewer lines).
PROGRESS_ATTRIBUTE = "progress"

_T = TypeVar("_T")


def logged_progress(
    items: Iterable[_T],
    *,
    total: int,
    what: str,
    logger: logging.Logger,
    min_total: int = 1,
) -> Iterator[_T]:
    """Yield ``items``, logging ``"<what>: k of <total>"`` at every tenth of ``total``.

    Each record is logged after the consumer finished the ``k``-th item, and
    carries ``(what, k, total)`` as its :data:`PROGRESS_ATTRIBUTE` attribute.

    Args:
        items: the work, in order.
        total: how many items there are (the length of ``items``).
        what: what is being counted, for example ``"runs bootstrapped"``.
        logger: where the INFO records go.
        min_total: loops shorter than this log nothing (they finish before a
            progress line could help anyone).
    """
    if total < max(1, min_total):
        yield from items
        return
    marks = {max(1, (total * step) // PROGRESS_STEPS) for step in range(1, PROGRESS_STEPS + 1)}
    for done, item in enumerate(items, start=1):
        yield item
        if done in marks:
            logger.info(
                "%s: %d of %d", what, done, total, extra={PROGRESS_ATTRIBUTE: (what, done, total)}
            )
