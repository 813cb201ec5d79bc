"""Warnings of failures that come per request are written sparsely: at most one of a kind per
period, the next one saying how many were left out (shared.logs.Sparse)."""

from __future__ import annotations

import logging

import pytest

from shared.logs import Sparse


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_kind_is_written_once_per_period_and_the_next_says_how_many_were_left_out() -> None:
    clock = Clock()
    sparse = Sparse(period_s=10.0, clock=clock)
    assert sparse.admit("unavailable") == 0
    assert [sparse.admit("unavailable") for _ in range(5)] == [None] * 5
    clock.now += 9.9
    assert sparse.admit("unavailable") is None
    clock.now += 0.1
    assert sparse.admit("unavailable") == 6
    assert sparse.admit("unavailable") is None


def test_kinds_are_counted_apart() -> None:
    clock = Clock()
    sparse = Sparse(period_s=10.0, clock=clock)
    assert sparse.admit(("source", "eats")) == 0
    assert sparse.admit(("source", "taxi")) == 0
    assert sparse.admit(("source", "eats")) is None
    clock.now += 10
    assert sparse.admit(("source", "taxi")) == 0
    assert sparse.admit(("source", "eats")) == 1


def test_a_storm_of_failures_writes_one_line_a_period(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    sparse = Sparse(period_s=10.0, clock=clock)
    logger = logging.getLogger("mlutp.test.sparse")
    with caplog.at_level(logging.WARNING, logger=logger.name):
        for second in range(30):
            clock.now = 100.0 + second
            for _ in range(100):
                sparse.warning(logger, "order source unavailable", "unavailable", source="eats")
    written = [record for record in caplog.records if record.name == logger.name]
    assert len(written) == 3
    assert [record.__dict__["left_out"] for record in written] == [0, 999, 999]
    assert all(record.__dict__["source"] == "eats" for record in written)
