"""The subscription interface between the instrumentation and its listeners
(``tracking/core/observe.py``): roles, nesting, threads, and that trackers and watches subscribe
for their blocks."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

pytest.importorskip("torch")

import pytest_fpcheck as fp
from pytest_fpcheck.tracking.core.observe import (
    bounder,
    subscribe,
    unsubscribe,
    watcher,
)


class _Bounder:
    def __init__(self, mode: str = "rigorous") -> None:
        self.mode = mode
        self.strict = True
        self.bounded = 0

    def kernel_bounded(self) -> None:
        self.bounded += 1

    def kernel_gap(self, kernel: str, source: Any, error: Exception, written: list[Any]) -> None:
        raise AssertionError("no launch is refused here")


class _Watcher:
    def kernel_operation(self, op: str, *rest: Any) -> None:
        pass


def test_the_innermost_subscriber_of_each_role_is_found() -> None:
    outer, inner, listening = _Bounder(), _Bounder("probabilistic"), _Watcher()
    assert bounder() is None
    subscribe(outer)
    subscribe(listening)
    subscribe(inner)
    try:
        assert bounder() is inner
        assert watcher() is listening
        unsubscribe(inner)
        assert bounder() is outer
    finally:
        unsubscribe(listening)
        unsubscribe(outer)
    assert bounder() is None
    assert watcher() is None


def test_subscriptions_are_per_thread() -> None:
    listener = _Bounder()
    seen: list[object] = []
    subscribe(listener)
    try:
        thread = threading.Thread(target=lambda: seen.append(bounder()))
        thread.start()
        thread.join()
    finally:
        unsubscribe(listener)
    assert seen == [None]


def test_a_re_entered_subscriber_leaves_its_outer_subscription_in_place() -> None:
    listener = _Bounder()
    subscribe(listener)
    subscribe(listener)
    unsubscribe(listener)
    try:
        assert bounder() is listener
    finally:
        unsubscribe(listener)
    assert bounder() is None


def test_tracker_and_watch_subscribe_for_their_blocks_only() -> None:
    with fp.track() as tracker:
        assert bounder() is tracker
        assert watcher() is None
        with fp.watch_nonfinite() as watch:
            assert watcher() is watch
            assert bounder() is tracker
        assert watcher() is None
    assert bounder() is None


def test_a_watch_records_what_the_instrumentation_shows_it() -> None:
    """The interface's call as the Triton instrumentation makes it: a NaN appearing from finite
    inputs is an appearance at the kernel's operation."""
    with fp.watch_nonfinite() as watch:
        listening = watcher()
        assert listening is watch
        listening.kernel_operation(
            "kernel.fdiv",
            ("kernel.py", 3),
            "float32",
            2.0**-126,
            [np.array([0.0, 1.0]), np.array([0.0, 2.0])],
            np.array([np.nan, 0.5]),
            1,
        )
    kinds = {(e.op, e.kind, e.count, e.appeared) for e in watch.events}
    assert kinds == {("kernel.fdiv", "nan", 1, True), ("kernel.fdiv", "div0", 1, True)}
