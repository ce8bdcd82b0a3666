"""AbortSignal and race(): any thread, asyncio and trio."""

from __future__ import annotations

import threading

import anyio
import anyio.lowlevel
import pytest

from harness_core import AbortSignal
from harness_core.abort import ABORTED, Aborted, _threadsafe_scheduler, race

pytestmark = pytest.mark.anyio


async def test_wait_returns_after_fire_from_another_thread() -> None:
    signal = AbortSignal()
    assert not signal.fired
    thread = threading.Timer(0.01, signal.fire, args=("stop button",))
    thread.start()
    await signal.wait()
    thread.join()
    assert signal.fired
    assert signal.reason == "stop button"
    assert repr(signal) == "AbortSignal(fired=True)"


async def test_fire_is_idempotent_and_wait_after_fire_returns() -> None:
    signal = AbortSignal()
    signal.fire("first")
    signal.fire("second")
    assert signal.reason == "first"
    await signal.wait()  # already fired: returns at once


async def test_race_returns_the_result_when_not_fired() -> None:
    async def work() -> int:
        await anyio.lowlevel.checkpoint()
        return 42

    assert await race(AbortSignal(), work) == 42
    assert await race(None, work) == 42


async def test_race_cancels_the_operation_when_fired() -> None:
    signal = AbortSignal()
    cancelled = anyio.Event()

    async def stalled() -> int:
        threading.Thread(target=signal.fire).start()  # another thread fires while the operation runs
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()
        raise AssertionError("unreachable")  # pragma: no cover - sleep_forever never returns

    async with anyio.create_task_group() as tg:
        tg.start_soon(signal.wait)
        assert await race(signal, stalled) is ABORTED
    assert cancelled.is_set()


async def test_race_with_an_already_fired_signal_does_not_run_the_operation() -> None:
    signal = AbortSignal()
    signal.fire()
    ran = False

    async def work() -> None:
        nonlocal ran
        ran = True

    assert await race(signal, work) is ABORTED
    assert not ran


async def test_race_does_not_swallow_outer_cancellation() -> None:
    signal = AbortSignal()
    with anyio.move_on_after(0.01) as scope:
        await race(signal, anyio.sleep_forever)
        raise AssertionError("unreachable")  # pragma: no cover - the outer scope cancels
    assert scope.cancelled_caught
    assert not signal.fired


async def test_race_propagates_operation_errors() -> None:
    async def broken() -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError):
        await race(AbortSignal(), broken)


async def test_waiters_are_unsubscribed_after_cancellation() -> None:
    signal = AbortSignal()
    with anyio.move_on_after(0.01):
        await signal.wait()
    assert signal._subscribers == []
    signal.fire()


def test_aborted_is_a_singleton() -> None:
    assert Aborted() is ABORTED
    assert repr(ABORTED) == "ABORTED"


def test_waiting_outside_an_event_loop_is_an_error() -> None:
    from harness_core.abort import _threadsafe_scheduler

    with pytest.raises(RuntimeError, match="running asyncio or trio event loop"):
        _threadsafe_scheduler()


def test_waiting_outside_an_event_loop_without_trio_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness_core.abort import _threadsafe_scheduler

    monkeypatch.delitem(__import__("sys").modules, "trio", raising=False)
    with pytest.raises(RuntimeError, match="running asyncio or trio event loop"):
        _threadsafe_scheduler()


async def test_a_signal_firing_as_the_operation_completes_keeps_the_result() -> None:
    signal = AbortSignal()

    async def finishes_while_firing() -> str:
        signal.fire()  # the wake-up is scheduled, but the operation has already completed
        return "done"

    assert await race(signal, finishes_while_firing) == "done"
    woken = anyio.Event()
    _threadsafe_scheduler()(woken.set)  # queued after the signal's wake-up: callbacks run in order
    await woken.wait()  # so the wake-up has run now: it must not have cancelled this task
    await anyio.lowlevel.checkpoint()
    assert signal.fired


async def test_abort_keeps_an_outer_cancellation() -> None:
    signal = AbortSignal()
    with anyio.CancelScope() as outer:

        async def cancelled_twice() -> None:
            outer.cancel()
            signal.fire()
            await anyio.sleep_forever()

        await race(signal, cancelled_twice)
        raise AssertionError("unreachable")  # pragma: no cover - the outer scope is cancelled
    assert outer.cancelled_caught


def test_without_asyncio_imported_the_scheduler_looks_for_trio(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness_core.abort import _threadsafe_scheduler

    monkeypatch.delitem(__import__("sys").modules, "asyncio", raising=False)
    with pytest.raises(RuntimeError, match="running asyncio or trio event loop"):
        _threadsafe_scheduler()
