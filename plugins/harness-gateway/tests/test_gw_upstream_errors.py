"""An unreachable upstream: clients and the console get a stable message naming the route; the
upstream URL and the OS error text stay in the server log (issue 21, item 5)."""

from __future__ import annotations

import secrets
import socket
from pathlib import Path

import httpx
import pytest
from gw_helpers import Process, wait_until

from harness_core.errors import Failure
from harness_gateway.errors import from_failure, public_failure

SHOWN = "route 'openai' is unreachable (connect error); details are in the gateway's log (request "


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("failure", "kind"),
    [
        (Failure(code="NETWORK", message="ConnectError: refused on POST http://10.0.0.1:9/v1"), "connect error"),
        (Failure(code="TIMEOUT", message="ReadTimeout: no progress for 5 s (read timeout) on POST x"), "read timeout"),
        (Failure(code="NETWORK", message="SomethingElse: on http://h"), "network error"),
        (Failure(code="TIMEOUT", message="* odd text"), "timeout"),
    ],
)
def test_a_transport_failure_is_shown_as_the_route_and_the_kind(failure: Failure, kind: str) -> None:
    shown = public_failure(failure, "work", "req-1")
    assert shown is not None
    assert shown.message == f"route 'work' is unreachable ({kind}); details are in the gateway's log (request req-1)"
    assert shown.code == failure.code
    assert "http" not in from_failure(shown).message


def test_other_failures_are_shown_as_they_are() -> None:
    assert public_failure(Failure(code="SERVER", message="upstream said no", status=500), "w", "r") is None
    assert public_failure(Failure(code="TIMEOUT", message="HTTP 408", status=408), "w", "r") is None
    assert public_failure(Failure(code="AUTH", message="bad key"), "w", "r") is None


def test_an_unreachable_upstream_is_a_stable_message_and_the_detail_is_logged(tmp_path: Path) -> None:
    port = _closed_port()
    master = "mk-" + secrets.token_urlsafe(24)
    config = tmp_path / "plugins.yaml"
    config.write_text(
        f"plugins:\n  gateway:\n    database: {tmp_path / 'gw.sqlite'}\n    master_key: ${{{{ env.GW_MASTER }}}}\n"
        f"  openai:\n    base_url: http://127.0.0.1:{port}/v1\n    api_key: null\n",
        encoding="utf-8",
    )
    process = Process(config, env={"GW_MASTER": master})
    try:
        with httpx.Client(base_url=process.url, timeout=60) as http:
            body = {"model": "openai/gpt-x", "messages": [{"role": "user", "content": "hi"}]}
            answers = [
                http.post("/v1/chat/completions", json=body),
                http.post("/v1/chat/completions", json={**body, "stream": True}),
                http.post("/v1/messages", json={**body, "max_tokens": 5}, headers={"anthropic-version": "2023-06-01"}),
            ]
            for answer in answers:
                assert answer.status_code == 502, answer.text
                assert SHOWN in answer.text
                assert str(port) not in answer.text
            message = answers[0].json()["error"]["message"]
            assert message == SHOWN + answers[0].headers["x-request-id"] + ")"
            console = {"authorization": f"Bearer {master}"}

            def recorded() -> bool:
                return http.get("/console/requests", headers=console).text.count('href="/console/requests/') >= 3

            wait_until(recorded)
            listing = http.get("/console/requests", headers=console).text
            ticket = listing.split('href="/console/requests/')[1].split('"')[0]
            page = http.get(f"/console/requests/{ticket}", headers=console).text
            assert "is unreachable (connect error)" in page
            for shown in (listing, page, http.get("/console/traffic", headers=console).text):
                assert f"127.0.0.1:{port}" not in shown
    finally:
        process.stop()
    detail = process.logged(rf"route 'openai': ConnectError: .* on POST http://127\.0\.0\.1:{port}/v1/chat/completions")
    assert len(detail) == 3
