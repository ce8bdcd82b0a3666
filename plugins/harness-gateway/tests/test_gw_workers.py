"""`/metrics` of several workers: one gateway's totals (prometheus-client's multiprocess mode).

Unit tests simulate two workers in this process (each with its own real metric files, as
prometheus-client writes them); the others run a real `harness serve --workers 2`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from gw_helpers import Process, gateway_yaml, ledger_rows, openai_sse, wait_until
from prometheus_client import values
from prometheus_client.multiprocess import MultiProcessCollector

from harness_core.testing import Reply, ScriptedServer
from harness_gateway.console.records import RecordStore
from harness_gateway.errors import DRAINED
from harness_gateway.metrics import MULTIPROC_DIR_ENV, GatewayMetrics
from harness_gateway.sqlite import SQLiteStore
from harness_gateway.workers import WorkerReaper, remove_directory

# ---------------------------------------------------------------------------------------- units


ECHO = {"model": "echo", "route": "mock"}


def sample(text: str, name: str, **labels: str) -> float:
    """The value of the sample ``name{labels}`` in exposition ``text`` (0 when absent)."""
    wanted = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    found = re.search(rf"^{re.escape(name)}\{{{re.escape(wanted)}\}} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def as_worker(monkeypatch: pytest.MonkeyPatch, directory: Path, pid: int) -> GatewayMetrics:
    """The metrics of a simulated worker ``pid`` writing its files in ``directory``."""
    monkeypatch.setenv(MULTIPROC_DIR_ENV, str(directory))
    monkeypatch.setattr(values, "ValueClass", values.MultiProcessValue(lambda: pid))  # type: ignore[no-untyped-call]
    return GatewayMetrics(directory)


def test_workers_share_totals_and_a_dead_worker_leaves_the_live_gauge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    first = as_worker(monkeypatch, tmp_path, 101)
    first.requests.labels("openai", "mock", "echo", "complete").inc(3)
    first.tokens.labels("mock", "echo", "output").inc(30)
    first.in_flight.labels("mock", "echo").inc(2)
    first.latency.labels("mock", "echo").observe(0.2)
    second = as_worker(monkeypatch, tmp_path, 102)
    second.requests.labels("openai", "mock", "echo", "complete").inc(4)
    second.tokens.labels("mock", "echo", "output").inc(40)
    second.in_flight.labels("mock", "echo").inc(1)
    second.latency.labels("mock", "echo").observe(0.3)

    both = [first.render().decode(), second.render().decode()]
    assert both[0] == both[1]  # whichever worker answers the scrape
    text = both[0]
    assert sample(text, "harness_gateway_requests_total", api="openai", status="complete", **ECHO) == 7
    assert sample(text, "harness_gateway_tokens_total", direction="output", **ECHO) == 70
    assert sample(text, "harness_gateway_streams_in_flight", **ECHO) == 3
    assert sample(text, "harness_gateway_request_seconds_count", **ECHO) == 2
    assert 'pid="' not in text  # livesum: one sum, not a series per worker

    reaper = WorkerReaper(tmp_path)
    assert reaper.update([101, 102, None]) == []  # None: a worker not started yet
    with caplog.at_level(logging.INFO, "uvicorn.error"):
        assert reaper.update([102, 103]) == [101]  # 101 died with two streams in flight; 103 replaced it
    assert "worker 101 exited" in caplog.text
    text = second.render().decode()
    assert sample(text, "harness_gateway_streams_in_flight", **ECHO) == 1
    assert sample(text, "harness_gateway_requests_total", api="openai", status="complete", **ECHO) == 7
    assert sample(text, "harness_gateway_tokens_total", direction="output", **ECHO) == 70


def test_multiprocess_metrics_need_the_directory_before_the_import(tmp_path: Path) -> None:
    assert values.ValueClass is values.MutexValue  # this test process imported prometheus_client without it
    with pytest.raises(RuntimeError, match=rf"{MULTIPROC_DIR_ENV} must be set before prometheus_client is imported"):
        GatewayMetrics(tmp_path)


def test_a_process_no_supervisor_started_watches_none() -> None:
    from harness_gateway.workers import watch_supervisor

    assert watch_supervisor() is None  # (pytest's process has no multiprocessing parent)


def test_remove_directory(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    directory = tmp_path / "metrics"
    directory.mkdir()
    (directory / "counter_1.db").write_bytes(b"\0" * 16)
    remove_directory(directory)
    assert not directory.exists()
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("x")
    with caplog.at_level(logging.WARNING, "uvicorn.error"):
        remove_directory(not_a_directory)
    assert f"could not remove the metrics directory {not_a_directory}" in caplog.text


# ------------------------------------------------------------------- harness serve --workers 2


class Workers:
    """A running `harness serve --workers 2` on the mock (``mock``: its plugins.yaml entry;
    ``gateway``: the lines of the ``gateway`` entry, ``extra``: more plugins): the process, the pids
    of the workers that started, the metrics directory and the TMPDIR it is in."""

    def __init__(
        self,
        tmp_path: Path,
        mock: str,
        env: dict[str, str] | None = None,
        *,
        gateway: str = "    drain_timeout: 1",
        extra: str = "",
    ) -> None:
        self.tmp = tmp_path / "tmp"
        self.tmp.mkdir()
        config = tmp_path / "plugins.yaml"
        yaml_text = gateway_yaml(gateway, extra, db=tmp_path / "gw.sqlite").replace("mock: {}", mock)
        config.write_text(yaml_text)
        self.process = Process(config, "--workers", "2", env={"TMPDIR": str(self.tmp), **(env or {})})
        self.url = self.process.url
        (announced,) = self.process.logged(r"2 workers share their metrics through (\S+)")
        self.directory = Path(announced.group(1))
        self.pids = self.ready(2)

    def ready(self, count: int) -> set[int]:
        """The pids of the next ``count`` workers to finish their start-up. The port accepts a
        connection as soon as each says so: a worker announces once its server listens on the
        socket the supervisor only bound (before, a health check after both ``ready`` lines could
        be refused: harness_gateway.server.announce_worker)."""
        address = self.url.removeprefix("http://").rsplit(":", 1)
        pids: set[int] = set()
        for _ in range(count):
            pids.add(int(self.process.wait_for(r"\[(\d+)\]: gateway ready").group(1)))
            socket.create_connection((address[0], int(address[1])), timeout=30).close()  # not refused
        return pids

    def served_by(self, request_id: str) -> int:
        """The pid of the worker that logged the end of request ``request_id`` (waits for the line)."""
        pattern = rf"\[(\d+)\]: request {re.escape(request_id)} "
        wait_until(lambda: bool(self.process.logged(pattern)), 60)
        return int(self.process.logged(pattern)[0].group(1))

    def stop(self) -> None:
        """Stop the gateway; its metrics directory must be gone, and nothing else left in TMPDIR."""
        assert self.directory.is_dir()
        self.process.stop()
        assert not self.directory.exists()
        assert list(self.tmp.iterdir()) == []


@pytest.fixture
def stale(tmp_path: Path) -> Path:
    """A PROMETHEUS_MULTIPROC_DIR left in the environment by something else (never to be written)."""
    directory = tmp_path / "stale"
    directory.mkdir()
    return directory


KEEP_ALIVE_OFF = httpx.Limits(max_keepalive_connections=0)  # every request on its own connection


def test_every_scrape_reports_the_whole_gateway(tmp_path: Path, stale: Path) -> None:
    workers = Workers(tmp_path, "mock: {}", env={MULTIPROC_DIR_ENV: str(stale)})
    assert workers.directory.parent == workers.tmp  # a fresh directory of its own, not the stale one
    try:
        usage = {"prompt_tokens": 0, "completion_tokens": 0}
        served: dict[int, int] = {}
        sent = 0

        async def batch(first: int) -> None:
            async with httpx.AsyncClient(timeout=30, limits=KEEP_ALIVE_OFF) as client:

                async def one(number: int) -> None:
                    prompt = "count " * (number % 5 + 1)
                    body = {"model": "mock/echo", "messages": [{"role": "user", "content": prompt}]}
                    response = await client.post(
                        workers.url + "/v1/chat/completions", json=body, headers={"x-request-id": f"req-{number}"}
                    )
                    assert response.status_code == 200
                    for kind in usage:
                        usage[kind] += response.json()["usage"][kind]

                async with anyio.create_task_group() as group:
                    for number in range(first, first + 8):
                        group.start_soon(one, number)

        while len(served) < 2:  # until both workers served requests (the kernel picks the acceptor)
            assert sent < 800, f"every request reached one worker: {served}"
            anyio.run(batch, sent)
            for number in range(sent, sent + 8):
                pid = workers.served_by(f"req-{number}")
                served[pid] = served.get(pid, 0) + 1
            sent += 8
        assert set(served) == workers.pids

        def totals(text: str) -> tuple[float, ...]:
            return (
                sample(text, "harness_gateway_requests_total", api="openai", status="complete", **ECHO),
                sample(text, "harness_gateway_tokens_total", direction="input", **ECHO),
                sample(text, "harness_gateway_tokens_total", direction="output", **ECHO),
                sample(text, "harness_gateway_request_seconds_count", **ECHO),
                sample(text, "harness_gateway_time_to_first_token_seconds_count", **ECHO),
                sample(text, "harness_gateway_streams_in_flight", **ECHO),
            )

        expected = (sent, usage["prompt_tokens"], usage["completion_tokens"], sent, sent, 0)
        scrapes = 0

        def scrape() -> tuple[int, tuple[float, ...]]:
            nonlocal scrapes
            scrapes += 1
            response = httpx.get(workers.url + "/metrics", headers={"x-request-id": f"scrape-{scrapes}"}, timeout=30)
            assert response.status_code == 200
            return workers.served_by(f"scrape-{scrapes}"), totals(response.text)

        # the last streams leave the in-flight gauge just after their response went out
        wait_until(lambda: scrape()[1] == expected, 60)
        answered: dict[int, list[tuple[float, ...]]] = {}
        while len(answered) < 2 or min(len(seen) for seen in answered.values()) < 2:
            assert scrapes < 800, f"every scrape reached one worker: {answered}"
            pid, found = scrape()
            answered.setdefault(pid, []).append(found)
        assert {found for seen in answered.values() for found in seen} == {expected}  # same totals from each

        # SIGHUP replaces every worker: their counts stay, their live gauges go
        old = workers.pids
        workers.process.process.send_signal(signal.SIGHUP)
        new = workers.ready(2)
        assert not new & old
        for pid in sorted(old):
            workers.process.wait_for(rf"worker {pid} exited")
            assert not list(workers.directory.glob(f"gauge_livesum_{pid}.db"))
        _, found = scrape()
        assert found == expected
    finally:
        workers.stop()
    assert list(stale.iterdir()) == []


def live_share(directory: Path, pid: int) -> float:
    """Streams in flight in worker ``pid``, read from its own metric file (none before its first
    stream), summed over its series (a stream starts as ``model="other"``, then moves to its model)."""
    files = [str(path) for path in directory.glob(f"gauge_livesum_{pid}.db")]
    return float(
        sum(
            found.value
            for metric in MultiProcessCollector.merge(files)  # type: ignore[no-untyped-call]
            for found in metric.samples
            if found.name == "harness_gateway_streams_in_flight"
        )
    )


def test_a_killed_worker_stops_counting_its_streams(tmp_path: Path) -> None:
    workers = Workers(tmp_path, "mock: {delay: 0.05}")
    streams = 6
    try:

        async def main() -> None:
            async with httpx.AsyncClient(timeout=120, limits=KEEP_ALIVE_OFF) as client:
                started = [anyio.Event() for _ in range(streams)]
                broken: list[int] = []
                send_broken, receive_broken = anyio.create_memory_object_stream[int](streams)
                body = {"model": "mock/echo", "messages": [{"role": "user", "content": "w " * 2000}], "stream": True}

                async def one(number: int) -> None:
                    try:
                        async with client.stream("POST", workers.url + "/v1/chat/completions", json=body) as response:
                            assert response.status_code == 200
                            async for _ in response.aiter_lines():
                                started[number].set()
                    except httpx.HTTPError:
                        broken.append(number)
                        send_broken.send_nowait(number)

                async def in_flight() -> float:
                    text = (await client.get(workers.url + "/metrics")).text
                    return sample(text, "harness_gateway_streams_in_flight", **ECHO)

                async def until(condition: Callable[[], Awaitable[bool]]) -> None:
                    """Poll the endpoint until ``condition`` holds (fails after 60 s)."""
                    with anyio.fail_after(60):
                        while True:
                            if await condition():
                                return
                            await anyio.sleep(0.01)

                with send_broken, receive_broken:
                    async with anyio.create_task_group() as group:
                        for number in range(streams):
                            group.start_soon(one, number)
                        for event in started:
                            await event.wait()
                        await until(lambda: _equals(in_flight(), streams))
                        shares = {pid: live_share(workers.directory, pid) for pid in workers.pids}
                        assert sum(shares.values()) == streams
                        victim = max(shares, key=lambda pid: shares[pid])
                        os.kill(victim, signal.SIGKILL)
                        await anyio.to_thread.run_sync(workers.process.wait_for, rf"worker {victim} exited")
                        left = streams - int(shares[victim])
                        await until(lambda: _equals(in_flight(), left))  # not counted twice, nor forever
                        with anyio.fail_after(60):  # the victim's clients saw their streams cut
                            for _ in range(int(shares[victim])):
                                await receive_broken.receive()
                        assert len(broken) == shares[victim]  # the others still stream
                        group.cancel_scope.cancel()

        anyio.run(main)
        workers.ready(1)  # the replacement started before the gateway stops
    finally:
        workers.stop()


async def _equals(value: Awaitable[float], expected: float) -> bool:
    return await value == expected


def test_a_reload_onto_a_broken_file_shows_why_and_keeps_serving(tmp_path: Path) -> None:
    """SIGHUP to the supervisor of ``--workers 2`` after an edit that breaks the start (an unknown
    fallback target): uvicorn keeps the running workers and says only that the new one was not
    ready; the supervisor logs the located problem the new worker reported, and the gateway
    serves on."""
    workers = Workers(tmp_path, "mock: {}")
    try:
        config = tmp_path / "plugins.yaml"
        broken = "  mock: {}\n  fallback: {targets: {mock: [nowhere]}, cooldown: 0}\n"
        config.write_text(config.read_text().replace("  mock: {}\n", broken))
        workers.process.process.send_signal(signal.SIGHUP)
        workers.process.wait_for(r"a new worker did not start, so the running workers keep serving: CONFIG")
        located = workers.process.wait_for(r"plugins\.yaml:\d+, plugin 'fallback', field 'targets\.mock\[0\]': (.*)")
        assert "names route 'nowhere', which no plugin serves" in located.group(1)
        body = {"model": "mock/echo", "messages": [{"role": "user", "content": "still here"}]}
        answer = httpx.post(workers.url + "/v1/chat/completions", json=body, timeout=30)
        assert answer.status_code == 200
        assert answer.json()["choices"][0]["message"]["content"] == "still here"
    finally:
        workers.stop()


def test_workers_stop_when_their_supervisor_is_killed(tmp_path: Path) -> None:
    """SIGKILL of the supervisor (or the OOM killer) stopped nothing: its workers went on serving,
    unsupervised, and a restart found the port in use. Each worker now watches its supervisor and
    shuts down gracefully once it is gone."""
    workers = Workers(tmp_path, "mock: {}")
    port = int(workers.url.rsplit(":", 1)[1])
    assert httpx.get(workers.url + "/healthz", timeout=30).status_code == 200
    supervisor = workers.process.process.pid
    os.kill(supervisor, signal.SIGKILL)
    assert workers.process.process.wait(60) == -signal.SIGKILL
    gone = {int(workers.process.wait_for(rf"worker (\d+): its supervisor \(pid {supervisor}\) is gone").group(1))}
    gone.add(int(workers.process.wait_for(rf"worker (\d+): its supervisor \(pid {supervisor}\) is gone").group(1)))
    assert gone == workers.pids
    workers.process.reader.join(60)  # every worker exited: the last holder of the log pipe closed it
    assert not workers.process.reader.is_alive()
    assert workers.process.process.stderr is not None
    workers.process.process.stderr.close()
    with socket.socket() as probe:  # the port is free for a restart
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", port))
    remove_directory(workers.directory)  # a killed supervisor leaves it (documented)


def test_a_sigterm_past_the_drain_timeout_aborts_the_streams_of_every_worker(tmp_path: Path) -> None:
    """SIGTERM to the supervisor of ``--workers 2`` while a stream outlives ``drain_timeout``: the
    worker's gateway aborts it as one process does (the client gets the in-stream ``ABORTED``
    error after its partial output; the ledger row and the console's record say ``aborted``,
    with the drain's message, charged what was streamed). uvicorn's own graceful-shutdown bound
    in the worker cancelled it first: recorded ``error`` without a code, with a ``CancelledError``
    traceback in the log."""
    stalled = ScriptedServer(Reply(reads=openai_sse("x" * 400), end="stall"))  # open until the gateway leaves
    with stalled:
        workers = Workers(
            tmp_path,
            "mock: {}",
            gateway=(  # the master key enables the console, whose records are checked too
                "    drain_timeout: 0.5\n    master_key: mk-workers-drain-0123456789\n"
                "    prices: {up/m: {input: 1000000, output: 1000000}}"  # 1 USD a token
            ),
            extra=f"  openai:up: {{base_url: '{stalled.url}/v1', api_key: dummy-key, routes: [up]}}",
        )
        body = {"model": "up/m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
        url = workers.url + "/v1/chat/completions"
        auth = {"authorization": "Bearer mk-workers-drain-0123456789"}
        with httpx.Client(timeout=60) as client, client.stream("POST", url, json=body, headers=auth) as reply:
            lines = reply.iter_lines()
            assert any("x" * 300 in line for line in lines)  # streaming (the masker may hold a tail back)
            workers.process.process.send_signal(signal.SIGTERM)  # the stream outlives the drain timeout
            rest = [line for line in lines if line]
        assert workers.process.process.wait(60) == 0  # the supervisor drained and stopped (docs: exit codes)
        workers.process.reader.join(60)  # every worker exited: the log is whole
        assert not workers.process.reader.is_alive()
    error = {"message": DRAINED, "type": "server_error", "param": None, "code": "ABORTED"}
    assert json.loads(rest[-1].removeprefix("data: ")) == {"error": error}
    assert not any('"finish_reason":"' in line or "[DONE]" in line for line in rest)
    log = "".join(workers.process.seen)
    assert workers.process.logged(r"aborting 1 generation\(s\) still running after the drain timeout")
    assert "Traceback" not in log  # a clean shutdown logs no exception
    assert "timeout graceful shutdown exceeded" not in log
    (row,) = ledger_rows(tmp_path / "gw.sqlite")
    assert row["status"] == "aborted"
    assert row["output_tokens"] == 100  # the 400 characters streamed, at 4 per token
    assert row["input_tokens"] > 0
    assert row["cost"] == pytest.approx(row["input_tokens"] + 100)
    (record,) = anyio.run(console_records, tmp_path / "gw.sqlite")
    assert (record["status"], record["error_code"], record["error_message"]) == ("aborted", "ABORTED", DRAINED)
    assert not workers.directory.exists()


async def console_records(db: Path) -> list[dict[str, Any]]:
    """The console's request records in the SQLite store at ``db``, newest first."""
    store = SQLiteStore(db)
    try:
        return await RecordStore(store).recent(10)
    finally:
        await store.aclose()
