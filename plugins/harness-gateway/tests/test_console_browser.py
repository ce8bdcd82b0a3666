"""The console in a real browser: Debian's chromium driven by Playwright (never ``playwright install``).

One walk through the console as an operator would: sign in with the master key, create a key
(shown once), run requests through the gateway with it (the mock provider, a failing route, a
tool call, and a scripted slow provider for a stream in flight), see them on Spend, Traffic and
Live, abort the stream in flight from Live, inspect a request's chunk timeline, set the key's
budget, revoke the key.
Every page is checked with axe-core (vendored in ``tests/assets``) and saved as a screenshot in
``test-artifacts/console/`` (git-ignored; ``HARNESS_ARTIFACTS`` moves it).

Waits are on events (selectors appearing, the provider's connection count, a thread's event),
never fixed sleeps.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from gw_helpers import Clients, gateway_yaml, serve_gateway
from openai.types.chat import ChatCompletionToolParam

from harness_core.testing import Reply, ScriptedServer

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
MASTER = "mk-console-master-0123456789abcdef"
AXE = Path(__file__).parent / "assets" / "axe.min.js"
ARTIFACTS = Path(os.environ.get("HARNESS_ARTIFACTS", Path(__file__).parents[3] / "test-artifacts")) / "console"

playwright_sync = pytest.importorskip("playwright.sync_api")

if not Path(CHROMIUM).exists():  # pragma: no cover - CI installs chromium (.ci/run); it fails there instead
    if os.environ.get("CI"):
        raise RuntimeError(f"{CHROMIUM} is missing: .ci/run installs Debian's chromium package")
    pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)", allow_module_level=True)


LONG_MODEL = "mock/" + "x" * 160  # no break opportunity: the tables must wrap or scroll it
FAKE_KEY = "sk-" + "abcdefghijklmnopqrstuvwx1234"  # built at run time: no key-shaped literal committed


def openai_sse(*pieces: str) -> list[bytes]:
    chunks = [{"id": "c1", "object": "chat.completion.chunk", "model": "m", "choices": [
        {"index": 0, "delta": {"role": "assistant", "content": piece}, "finish_reason": None}
    ]} for piece in pieces]  # fmt: skip
    return [f"data: {json.dumps(c)}\n\n".encode() for c in chunks]


@pytest.fixture
def browser() -> Iterator[Any]:
    with playwright_sync.sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield launched
        finally:
            launched.close()


def check_page(page: Any, name: str) -> None:
    """Screenshot the page and fail on any axe-core violation (WCAG 2 A and AA rules).

    A newly created key is masked in the screenshot: artefacts never hold a secret."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True, mask=[page.locator("#new-key")])
    assert_tables_fit(page, name)
    page.add_script_tag(path=str(AXE))
    result = page.evaluate(
        "() => axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21aa', 'best-practice']}})"
    )
    problems = [f"{v['id']}: {v['help']} at {[n['target'] for n in v['nodes']]}" for v in result["violations"]]
    assert not problems, f"{name}: accessibility violations:\n" + "\n".join(problems)


_OVERFLOWING_TABLES = """() => {
  const width = document.documentElement.clientWidth;
  const out = [];
  const page = document.documentElement.scrollWidth;
  if (page > width) out.push(`the page scrolls sideways (${page} > ${width} px)`);
  for (const table of document.querySelectorAll("table")) {
    let box = table, up = table.parentElement;
    for (; up; up = up.parentElement) {
      const style = getComputedStyle(up).overflowX;
      if (style === "auto" || style === "scroll") { box = up; break; }
    }
    const rect = box.getBoundingClientRect();
    const what = table.id || table.caption?.textContent || "a table";
    if (rect.left < 0 || rect.right > width) out.push(`${what}: ${rect.left | 0}..${rect.right | 0} px`);
  }
  return out;
}"""


def assert_tables_fit(page: Any, name: str) -> None:
    """Every table fits the viewport or scrolls sideways inside a container that does (the page
    itself never scrolls sideways)."""
    overflowing = page.evaluate(_OVERFLOWING_TABLES)
    assert not overflowing, f"{name} at {page.viewport_size['width']} px: " + "; ".join(overflowing)


@pytest.fixture(scope="module", autouse=True)
def _fresh_artifacts() -> None:
    shutil.rmtree(ARTIFACTS, ignore_errors=True)  # this module's screenshots only, from this run


def test_console_walkthrough(tmp_path: Path, browser: Any) -> None:
    slow = ScriptedServer(Reply(reads=openai_sse("still ", "going "), end="stall"))
    gateway = f"""\
    master_key: {MASTER}
    require_keys: true
    prices: {{mock/echo: {{input: 1000, output: 2000}}}}"""
    with slow:
        extra = f"""\
  mock:broken: {{routes: [broken], error: OVERLOADED}}
  openai:slow: {{base_url: '{slow.url}/v1', api_key: provider-secret-key, routes: [slow]}}"""
        yaml_text = gateway_yaml(gateway, extra, db=tmp_path / "gw.sqlite")
        with serve_gateway(tmp_path, yaml_text) as running:
            context = browser.new_context(bypass_csp=True, viewport={"width": 1280, "height": 900})  # axe is injected
            page = context.new_page()
            clients = Clients(running.url)
            try:
                walk(page, running.url, clients, slow)
            finally:
                clients.close()
                context.close()


def walk(page: Any, url: str, clients: Clients, slow: ScriptedServer) -> None:
    # ---------------------------------------------------------------- sign in
    page.goto(url + "/console")
    assert page.url.startswith(url + "/console/login")
    check_page(page, "01-login")
    page.fill("#master_key", "not-the-key")
    page.click("button[type=submit]")
    assert "not the gateway's master key" in page.text_content("[role=alert]")
    page.fill("#master_key", MASTER)
    page.click("button[type=submit]")
    page.wait_for_url(url + "/console/spend")

    # ---------------------------------------------------------------- create a key (shown once)
    page.click("text=Keys")
    page.fill("#name", "team-a")
    page.fill("#budget", "5")
    page.fill("#rpm", "not a number")
    page.click("#create-key button[type=submit]")
    assert "rpm: expected a whole number" in page.text_content("#key-error")
    page.fill("#rpm", "100")
    page.click("#create-key button[type=submit]")
    key = page.input_value("#new-key")
    assert key.startswith("hk-")
    check_page(page, "02-key-created")
    page.goto(url + "/console/keys")
    assert key not in page.content(), "a key is shown only once"
    assert "team-a" in page.text_content("#keys-table")

    # ---------------------------------------------------------------- requests through the gateway
    client = clients.openai(key)
    for text in ("hello there", "spend some tokens", f"a secret {FAKE_KEY} here"):
        client.chat.completions.create(model="mock/echo", messages=[{"role": "user", "content": text}])
    tool: ChatCompletionToolParam = {"type": "function", "function": {"name": "echo", "parameters": {"type": "object"}}}
    stream = client.chat.completions.create(
        model="mock/echo",
        messages=[{"role": "user", "content": "please echo this"}],
        tools=[tool],
        stream=True,
        stream_options={"include_usage": True},
    )
    for _ in stream:
        pass
    clients.anthropic(key).messages.create(
        model="mock/echo", max_tokens=50, messages=[{"role": "user", "content": "from anthropic"}]
    )
    with pytest.raises(openai.APIStatusError):
        client.chat.completions.create(model="broken/echo", messages=[{"role": "user", "content": "fail"}])
    with pytest.raises(openai.NotFoundError):  # a long unbroken model id in tables and error texts
        client.chat.completions.create(model=LONG_MODEL, messages=[{"role": "user", "content": "x" * 300}])

    # ---------------------------------------------------------------- Spend
    page.goto(url + "/console/spend?bucket=hour&by=key")
    row = page.locator("#spend-table tbody tr", has_text="team-a")
    cells = row.locator("td").all_text_contents()
    assert cells[0] == "7", cells  # requests
    assert cells[-1].startswith("$0.0"), cells  # priced from the config's prices
    assert "team-a" in page.text_content("#budgets-table")
    page.wait_for_function("document.querySelector('canvas[data-chart]')?.chart !== undefined")
    check_page(page, "03-spend")
    page.select_option("#bucket", "day")
    page.select_option("#by", "model")
    page.click("form.filters button")
    assert "mock/echo" in page.text_content("#spend-table")
    check_page(page, "04-spend-day-model")

    # ---------------------------------------------------------------- Traffic
    page.click("text=Traffic")
    traffic = page.locator("#traffic-table tbody tr", has_text="mock/echo").locator("td").all_text_contents()
    assert traffic[0] == "5", traffic
    assert "OVERLOADED" in page.text_content("#errors-table")
    check_page(page, "05-traffic")

    # ---------------------------------------------------------------- Live: a stream appears, is aborted, leaves
    page.click("text=Live")
    page.wait_for_function("document.getElementById('live-table')?.dataset.updates !== undefined")
    check_page(page, "06-live-empty")
    first_piece = threading.Event()
    ended = threading.Event()
    received: list[str] = []

    def stream_slowly() -> None:
        body = {"model": "slow/m", "messages": [{"role": "user", "content": "take your time"}], "stream": True}
        headers = {"authorization": f"Bearer {key}"}
        with (
            httpx.Client(timeout=60) as http,
            http.stream("POST", url + "/v1/chat/completions", json=body, headers=headers) as response,
        ):
            for line in response.iter_lines():
                received.append(line)
                if "still" in line:
                    first_piece.set()
        ended.set()

    streamer = threading.Thread(target=stream_slowly, daemon=True)
    streamer.start()
    assert first_piece.wait(30), "the slow stream never started"
    live_row = page.locator("#live-table tbody tr", has_text="slow")
    live_row.wait_for()
    cells = live_row.locator("td").all_text_contents()
    assert cells[:3] == ["slow", "m", "team-a"], cells
    check_page(page, "07-live-in-flight")
    live_row.get_by_role("button", name="Abort").click()
    page.wait_for_url(url + "/console/live")
    page.locator("#live-table tbody tr").first.wait_for(state="detached")
    assert ended.wait(30), "the aborted stream did not end for its client"
    streamer.join(30)
    assert slow.wait_idle(10), "the provider connection of the aborted stream leaked"
    assert page.text_content("#live-status") == "0 stream(s) in flight."

    # ---------------------------------------------------------------- Requests and the inspector
    page.click("text=Requests")
    check_page(page, "08-requests")
    assert "aborted" in page.locator("#requests-table tbody tr").first.text_content()
    page.locator("#requests-table tbody tr", has_text="mock/echo").nth(4).locator("a").click()  # the oldest: "hello"
    page.locator("#timeline").wait_for()
    page.goto(url + "/console/requests")
    # newest first: anthropic, tool call, the secret one, "spend …", "hello …"
    page.locator("#requests-table tbody tr", has_text="mock/echo").nth(2).locator("a").click()
    content = page.text_content("main")
    assert FAKE_KEY not in content
    assert "[REDACTED:" in content
    events = page.locator("#timeline tbody th").all_text_contents()
    assert events[0] == "block-start", events
    assert events[-2:] == ["usage", "finish"], events
    check_page(page, "09-inspector")
    page.goto(url + "/console/requests")
    page.locator("#requests-table tbody tr", has_text="mock/echo").nth(1).locator("a").click()  # the tool call
    assert "echo" in page.text_content("#tool-calls")
    check_page(page, "10-inspector-tool-call")
    page.goto(url + "/console/requests")
    page.locator("#requests-table tbody tr", has_text="broken/echo").locator("a").click()
    assert "OVERLOADED" in page.text_content("#request-error")
    page.goto(url + "/console/requests")
    page.locator("#requests-table tbody tr", has_text=LONG_MODEL[:40]).locator("a").click()
    assert "NOT_FOUND" in page.text_content("#request-error")
    check_page(page, "10b-inspector-long-model")

    # ---------------------------------------------------------------- set the key's budget, then revoke it
    page.click("text=Keys")
    row = page.locator("#keys-table tbody tr", has_text="team-a")
    row.get_by_label("Budget in USD of key team-a (empty: unlimited)").fill("7.5")
    row.get_by_role("button", name="Set the budget of key team-a").click()
    page.wait_for_url(url + "/console/keys")
    assert "$7.5$" in page.locator("#keys-table tbody tr", has_text="team-a").text_content()  # budget, spent
    check_page(page, "11a-keys-budget-set")
    page.locator("#keys-table tbody tr", has_text="team-a").get_by_role("button", name="Revoke key team-a").click()
    page.wait_for_url(url + "/console/keys")
    assert "revoked" in page.locator("#keys-table tbody tr", has_text="team-a").text_content()
    check_page(page, "11-keys-revoked")
    with pytest.raises(openai.AuthenticationError):
        client.chat.completions.create(model="mock/echo", messages=[{"role": "user", "content": "again"}])

    # ---------------------------------------------------------------- sign out
    page.click("text=Sign out")
    page.wait_for_url(url + "/console/login")
    page.goto(url + "/console/keys")
    assert page.url.startswith(url + "/console/login?next=/console/keys")


def test_local_console_pages(tmp_path: Path, browser: Any) -> None:
    """``harness console``'s pages (no Live, no Keys) over a ledger and log written by real streams."""
    import socket

    import uvicorn
    from test_console_local import write_history

    from harness_gateway.console.local import local_app

    usage, log = write_history(tmp_path)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    server = uvicorn.Server(uvicorn.Config(local_app(usage, log, MASTER), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    context = browser.new_context(bypass_csp=True)
    try:
        page = context.new_page()
        page.goto(url + "/console")
        page.fill("#master_key", MASTER)
        page.click("button[type=submit]")
        page.wait_for_url(url + "/console/spend")
        assert page.locator("nav a").all_text_contents() == ["Spend", "Traffic", "Requests"]
        check_page(page, "20-local-spend")
        page.click("text=Traffic")
        assert "OVERLOADED" in page.text_content("#errors-table")
        check_page(page, "21-local-traffic")
        page.click("text=Requests")
        check_page(page, "22-local-requests")
        page.locator("#requests-table tbody tr a").last.click()
        assert "hello local" in page.text_content("main")
        assert "keeps no per-chunk timeline" in page.text_content("#no-rates")
        check_page(page, "23-local-inspector")
    finally:
        context.close()
        server.should_exit = True
        thread.join(30)
        sock.close()


def test_spend_by_pool_member(tmp_path: Path, browser: Any) -> None:
    """A balance pool of two mock deployments: Spend by route shows the pool, by member each
    deployment that served, priced at its own rate."""
    gateway = f"""\
    master_key: {MASTER}
    prices: {{east/echo: {{input: 1000000, output: 1000000}}, west/echo: {{input: 2000000, output: 2000000}}}}"""
    extra = """\
  balance:
    seed: 5
    pools:
      pool: [{target: east/echo}, {target: west}]
  mock:east: {routes: [east]}
  mock:west: {routes: [west]}"""
    with serve_gateway(tmp_path, gateway_yaml(gateway, extra, db=tmp_path / "gw.sqlite")) as running:
        clients = Clients(running.url)
        context = browser.new_context(bypass_csp=True, viewport={"width": 1280, "height": 900})  # axe is injected
        try:
            client = clients.openai()
            replies = [
                client.chat.completions.create(model="pool/echo", messages=[{"role": "user", "content": "hi"}])
                for _ in range(12)
            ]
            assert {reply.model for reply in replies} == {"pool/echo"}  # the client sees the pool
            page = context.new_page()
            page.goto(running.url + "/console")
            page.fill("#master_key", MASTER)
            page.click("button[type=submit]")
            page.wait_for_url(running.url + "/console/spend")
            page.goto(running.url + "/console/spend?bucket=day&by=route")
            cells = page.locator("#spend-table tbody tr", has_text="pool").locator("td").all_text_contents()
            assert cells[0] == "12", cells
            page.select_option("#by", "member")
            page.click("form.filters button")
            page.wait_for_url("**by=member")
            found: dict[str, tuple[int, int, float]] = {}
            for member in ("east/echo", "west/echo"):
                row = page.locator("#spend-table tbody tr", has_text=member).locator("td").all_text_contents()
                found[member] = (int(row[0]), int(row[1]) + int(row[2]), float(row[-1].lstrip("$")))
            assert sum(requests for requests, _, _ in found.values()) == 12
            assert all(requests > 0 for requests, _, _ in found.values()), found  # both members served
            for member, rate in (("east/echo", 1.0), ("west/echo", 2.0)):
                _, tokens, cost = found[member]
                assert cost == tokens * rate, (member, found)  # priced by the member that served
            assert "Totals by member" in page.text_content("main")
            check_page(page, "30-spend-by-member")
        finally:
            clients.close()
            context.close()
