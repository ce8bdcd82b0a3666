"""Reload without a restart (SIGHUP on a real `harness serve` process) and a bounded loopback load test."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
from gw_helpers import GatedUpstream, Process, gateway_yaml, serve_gateway, wait_until

from harness_gateway.errors import DRAINED


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Process, Path]]:
    config = tmp_path / "plugins.yaml"
    config.write_text(gateway_yaml("", db=tmp_path / "gw.sqlite").replace("mock: {}", "mock: {delay: 0.02}"))
    process = Process(config)
    try:
        yield process, config
    finally:
        process.stop()


async def stream_text(client: httpx.AsyncClient, url: str, model: str, started: anyio.Event | None = None) -> str:
    body = {"model": model, "messages": [{"role": "user", "content": "w " * 20}], "stream": True}
    text = ""
    async with client.stream("POST", url + "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if started is not None and not started.is_set():
                started.set()
            if line.startswith("data: {"):
                choices = json.loads(line[6:])["choices"]
                text += "".join(c["delta"].get("content") or "" for c in choices)
    return text


def test_sighup_swaps_the_runtime_without_losing_streams(served: tuple[Process, Path]) -> None:
    process, config = served

    async def main() -> None:
        async with httpx.AsyncClient(timeout=60) as client:
            results: list[str] = []
            events = [anyio.Event() for _ in range(10)]

            async def one(event: anyio.Event) -> None:
                results.append(await stream_text(client, process.url, "mock/echo", event))

            async with anyio.create_task_group() as group:
                for event in events:
                    group.start_soon(one, event)
                for event in events:
                    await event.wait()  # every stream is in flight on the old runtime
                config.write_text(
                    config.read_text().replace("  gateway:\n", "  gateway:\n    aliases: {fresh: mock/echo}\n")
                )
                process.process.send_signal(signal.SIGHUP)
                await anyio.to_thread.run_sync(process.wait_for, "runtime replaced")
                assert await stream_text(client, process.url, "fresh") == "w " * 20  # new requests: new runtime
            assert results == ["w " * 20] * 10  # streams in flight finished on the old one

            config.write_text(config.read_text().replace("delay: 0.02", "delay: -1"))
            process.process.send_signal(signal.SIGHUP)
            await anyio.to_thread.run_sync(process.wait_for, "reload refused")
            await anyio.to_thread.run_sync(process.wait_for, r"plugins.yaml:\d+, plugin 'mock', field 'delay'")
            assert await stream_text(client, process.url, "fresh") == "w " * 20  # the old runtime still serves

    anyio.run(main)


def test_a_reload_applies_drain_timeout_and_warns_of_each_setting_read_at_start(tmp_path: Path) -> None:
    """SIGHUP onto a file that lowers ``drain_timeout`` (60 -> 0.5 s) and changes settings read
    only at start (``port``, ``master_key``, ``lease``): the next SIGTERM drains with the new
    timeout (it drained for the old 60 s; the upstream holds the stream's last event for 10 s, so
    the stream then ended complete instead of aborted), and the reload logged one warning naming
    each start-only setting changed, never a value (the master key is a secret)."""
    pieces = ["x" * 400, "never sent"]
    master = "a-master-key-of-the-old-file"
    with GatedUpstream(pieces) as upstream:
        config = tmp_path / "plugins.yaml"
        extra = f"  openai:up: {{base_url: '{upstream.url}/v1', api_key: dummy-key, routes: [up]}}"
        old = f"    drain_timeout: 60\n    port: 8000\n    master_key: {master}"
        config.write_text(gateway_yaml(old, extra, db=tmp_path / "gw.sqlite"))
        process = Process(config)
        new = f"    drain_timeout: 0.5\n    port: 8001\n    master_key: {master}-rotated\n    lease: 7"
        config.write_text(gateway_yaml(new, extra, db=tmp_path / "gw.sqlite"))
        process.process.send_signal(signal.SIGHUP)
        process.wait_for("runtime replaced")
        warning = process.wait_for(r"WARNING .*reload: gateway setting\(s\) (.*) changed but are read only at start")
        assert warning.group(1) == "port, master_key, lease"
        body = {"model": "up/m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
        with (
            httpx.Client(timeout=60) as client,
            client.stream("POST", process.url + "/v1/chat/completions", json=body) as reply,
        ):
            lines = reply.iter_lines()
            assert any("x" * 300 in line for line in lines)  # streaming: the second event is held
            process.stop()  # SIGTERM: the reloaded drain_timeout (0.5 s) passes long before the 10 s hold
            rest = [line for line in lines if line]
    assert json.loads(rest[-1].removeprefix("data: "))["error"]["message"] == DRAINED
    assert process.logged(r"aborting 1 generation\(s\) still running after the drain timeout")
    assert not any(master in line for line in process.seen)  # the changed secret is named, never shown


def test_five_hundred_concurrent_streams(tmp_path: Path) -> None:
    yaml_text = gateway_yaml("", db=tmp_path / "gw.sqlite")
    with serve_gateway(tmp_path, yaml_text) as running:

        async def main() -> list[str]:
            limits = httpx.Limits(max_connections=500, max_keepalive_connections=0)
            async with httpx.AsyncClient(timeout=120, limits=limits) as client:
                results: list[str] = []

                async def one() -> None:
                    results.append(await stream_text(client, running.url, "mock/echo"))

                async with anyio.create_task_group() as group:
                    for _ in range(500):
                        group.start_soon(one)
                return results

        results = anyio.run(main)
        assert results == ["w " * 20] * 500
        holder = running.gateway.holder
        wait_until(lambda: holder.current.in_flight == 0)  # the server's bookkeeping ends after the last byte
        metrics = httpx.get(running.url + "/metrics").text
        assert 'harness_gateway_streams_in_flight{model="echo",route="mock"} 0.0' in metrics
        assert 'status="complete"} 500.0' in metrics


def test_a_reload_refused_for_an_unset_variable_logs_its_problem_once(tmp_path: Path) -> None:
    """With ``--reload``, one edit is read by the SIGHUP and by the watch: its located problem is
    one line of the log; the second refusal says it is the same."""
    config = tmp_path / "plugins.yaml"
    config.write_text(gateway_yaml("", db=tmp_path / "gw.sqlite"))
    process = Process(config, "--reload")
    try:
        config.write_text(
            config.read_text().replace("  gateway:\n", "  gateway:\n    master_key: ${{ env.NOPE_UNSET }}\n")
        )
        process.process.send_signal(signal.SIGHUP)
        process.wait_for("changed: reloading")  # the watch's reload, after or before the SIGHUP's
        process.wait_for("reload refused, keeping the current runtime: the same problems as the last reload's")
        problem = r"plugins\.yaml:\d+, plugin 'gateway', field 'master_key': environment variable NOPE_UNSET is not set"
        assert len(process.logged(problem)) == 1, "".join(process.seen)
        assert len(process.logged("reload refused")) == 2
        config.write_text(gateway_yaml("", db=tmp_path / "gw.sqlite"))  # fixed: replaced, the memory cleared
        process.wait_for("runtime replaced")
        config.write_text(
            config.read_text().replace("  gateway:\n", "  gateway:\n    master_key: ${{ env.NOPE_UNSET }}\n")
        )
        process.wait_for(problem)  # broken again: its problem is logged afresh
    finally:
        process.stop()
