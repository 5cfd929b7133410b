"""Progress records of long loops: at most one per tenth, after the item is done."""

from __future__ import annotations

import logging

import pytest

from deepecgkit.progress import PROGRESS_ATTRIBUTE, PROGRESS_STEPS, logged_progress

LOGGER = logging.getLogger("deepecgkit.tests.progress")


def _progress(records: list[logging.LogRecord]) -> list[tuple[str, int, int]]:
    return [getattr(r, PROGRESS_ATTRIBUTE) for r in records if hasattr(r, PROGRESS_ATTRIBUTE)]


@pytest.mark.parametrize("total", [1, 3, 10, 25, 1000])
def test_every_item_is_yielded_and_the_last_record_says_done(
    total: int, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger=LOGGER.name):
        items = list(logged_progress(range(total), total=total, what="w", logger=LOGGER))
    assert items == list(range(total))
    progress = _progress(caplog.records)
    assert 1 <= len(progress) <= PROGRESS_STEPS
    assert progress[-1] == ("w", total, total)
    done = [d for _, d, _ in progress]
    assert done == sorted(set(done))
    assert caplog.records[-1].getMessage() == f"w: {total} of {total}"


def test_a_record_follows_the_work_on_its_item(caplog: pytest.LogCaptureFixture) -> None:
    seen: list[int] = []
    with caplog.at_level(logging.INFO, logger=LOGGER.name):
        for item in logged_progress(range(10), total=10, what="w", logger=LOGGER):
            seen.append(item)
            assert _progress(caplog.records)[-1:] in ([], [("w", item, 10)])
    assert len(_progress(caplog.records)) == 10


def test_short_loops_log_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger=LOGGER.name):
        assert list(logged_progress([1, 2], total=2, what="w", logger=LOGGER, min_total=3)) == [
            1,
            2,
        ]
        assert list(logged_progress([], total=0, what="w", logger=LOGGER)) == []
    assert _progress(caplog.records) == []
