"""The plugin inside a user's suite (pytester), and proof that it changes nothing else."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

import pytest_harness
import pytest_harness.plugin as plugin
from harness_core.testing import FakeAdapter, Reply, ScriptedServer, StreamChecker, text_reply
from harness_core.types import ModelInfo

pytest_plugins = ["pytester"]


def test_fixtures_work_in_a_user_suite(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import httpx
        import pytest
        from harness_core.testing import Reply, text_reply, StreamViolation
        from harness_core.types import GenerateOptions, TextDelta

        def test_server(harness_server):
            harness_server.add(Reply(reads=[b"data: a\\n\\n"]))
            assert httpx.post(harness_server.url).text == "data: a\\n\\n"
            assert harness_server.requests[0].method == "POST"

        def test_factory(harness_server_factory):
            one = harness_server_factory(Reply(reads=[b"1"]))
            two = harness_server_factory(routes={("GET", "/models"): Reply(reads=[b"m"])})
            assert httpx.get(one.url).text == "1"
            assert httpx.get(two.url + "/models").text == "m"
            assert one.url != two.url

        @pytest.mark.anyio
        async def test_fake_adapter(harness_fake_adapter, harness_check_stream):
            adapter = harness_fake_adapter(text_reply("hi"))
            chunks = [c async for c in adapter.stream(GenerateOptions())]
            assert harness_check_stream(chunks) == chunks
            assert [c.text for c in chunks if isinstance(c, TextDelta)] == ["hi"]

        def test_checker(harness_stream_checker, harness_check_stream):
            with pytest.raises(StreamViolation):
                harness_check_stream([])
            harness_stream_checker.feed(text_reply()[0])
            harness_stream_checker.end()

        def test_cases(harness_cases, tmp_path, monkeypatch):
            monkeypatch.setenv("HARNESS_CASES_DIR", str(tmp_path))
            assert harness_cases() == []
        """
    )
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture
        def anyio_backend():
            return "asyncio"
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "error")
    result.assert_outcomes(passed=5)


def test_servers_are_stopped_after_the_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import threading

        def test_a(harness_server):
            assert harness_server.url

        def test_b():
            assert not [t for t in threading.enumerate() if t.name.startswith("ScriptedServer")]
        """
    )
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly").assert_outcomes(passed=2)


def test_installing_it_changes_nothing_else(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import pytest
        from anyio.pytest_plugin import get_available_backends

        @pytest.mark.anyio
        async def test_backends(anyio_backend):
            # anyio's own default parametrisation: the plugin never overrides anyio_backend
            assert anyio_backend in get_available_backends()

        def test_plain():
            assert True
        """
    )
    with_plugin = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v", "-W", "error")
    without = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:harness", "-v", "-W", "error")
    with_plugin.assert_outcomes(passed=without.parseoutcomes()["passed"])
    assert [line for line in with_plugin.outlines if "::" in line] == [
        line for line in without.outlines if "::" in line
    ]
    assert any("harness-0.1.0" in line for line in with_plugin.outlines)  # the plugin was loaded
    fixtures = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--fixtures", "-v")
    lines = [line for line in fixtures.outlines if "pytest_harness" in line]
    names = {line.split()[0] for line in lines if line[:1].isalpha()}
    assert names == {
        "harness_cases",
        "harness_check_stream",
        "harness_fake_adapter",
        "harness_server",
        "harness_server_factory",
        "harness_stream_checker",
    }


def test_plugin_module_defines_only_harness_fixtures() -> None:
    public = {name for name, value in vars(plugin).items() if not name.startswith("_") and callable(value)}
    hooks = {name for name in vars(plugin) if name.startswith("pytest_")}
    assert hooks == set()
    assert "anyio_backend" not in public
    fixtures = {name for name in public if name.startswith("harness_")}
    assert fixtures == set(plugin.__all__)
    assert all(inspect.getmodule(getattr(plugin, name)) is plugin for name in fixtures)


# ---------------------------------------------------------------- the same fixtures, in this process


def test_module_body_runs_under_coverage() -> None:
    # entry-point plugins are imported before coverage starts; re-run the module body once
    importlib.reload(pytest_harness)
    importlib.reload(plugin)
    assert set(plugin.__all__) <= set(vars(plugin))


def test_in_process_server(
    harness_server: ScriptedServer, harness_server_factory: Callable[..., ScriptedServer]
) -> None:
    harness_server.add(Reply(reads=[b"x"]))
    other = harness_server_factory(Reply(reads=[b"y"]))
    assert httpx.post(harness_server.url).text == "x"
    assert httpx.post(other.url).text == "y"


def test_in_process_kit_fixtures(
    harness_fake_adapter: Callable[..., FakeAdapter],
    harness_check_stream: Callable[..., Any],
    harness_stream_checker: StreamChecker,
    harness_cases: Callable[..., Any],
) -> None:
    adapter = harness_fake_adapter(text_reply("a"), models=[ModelInfo(model="m")])
    assert adapter.resolve_model("m") == ModelInfo(model="m")
    assert harness_check_stream(text_reply("a")) == text_reply("a")
    assert harness_stream_checker.chunks == []
    assert all(case.provider_format for case in harness_cases())


def test_the_conformance_suite_is_exported_lazily() -> None:
    from harness_core.testing import conformance

    assert pytest_harness.AdapterConformance is conformance.AdapterConformance
    assert pytest_harness.load_recordings is conformance.load_recordings
    with pytest.raises(AttributeError, match="'pytest_harness' has no attribute 'nope'"):
        _ = pytest_harness.nope  # type: ignore[attr-defined]


def test_load_cases_or_skip_loads_skips_off_ci_and_raises_on_ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = tmp_path / "01-one"
    case.mkdir()
    (case / "meta.json").write_text('{"provider_format": "openai-chat"}')
    (case / "stream.sse").write_bytes(b"data: [DONE]\n\n")
    monkeypatch.setenv("CI", "")
    assert [c.name for c in pytest_harness.load_cases_or_skip("openai-chat", directory=tmp_path)] == ["01-one"]
    missing = tmp_path / "missing"
    for off in ("", "0", "false", "No"):
        monkeypatch.setenv("CI", off)
        with pytest.raises(pytest.skip.Exception, match=r"the fault cases folder .*missing' does not exist"):
            pytest_harness.load_cases_or_skip(directory=missing)
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception):
        pytest_harness.load_cases_or_skip(directory=missing)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(FileNotFoundError, match="set HARNESS_CASES_DIR"):
        pytest_harness.load_cases_or_skip(directory=missing)
