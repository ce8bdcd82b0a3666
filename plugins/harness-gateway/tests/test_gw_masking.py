"""The gateway's own secrets stay out of everything it stores or shows (issue 21, item 3).

A freshly created ``hk-…`` key and the master key, pasted into a prompt (and so echoed in the
reply by the mock), sent as a model id and in a URL path, go through ``harness serve`` (a
subprocess) with console records and the prompt log on. Neither shows in the database files'
bytes, the prompt log's bytes, the console's pages or the server log; the key format is owned by
:mod:`harness_gateway.keys` (its pattern matches what the generator makes).
"""

from __future__ import annotations

import secrets
from pathlib import Path

import httpx
from gw_helpers import Process, wait_until

from harness_core.secret import MASK
from harness_gateway.keys import KEY_PATTERN, KEY_PREFIX, mask_keys, new_key


def test_the_pattern_matches_every_generated_key_and_nothing_shorter() -> None:
    for _ in range(200):
        key = new_key()
        assert KEY_PATTERN.fullmatch(key), key
        assert mask_keys(f"see {key}.") == f"see {MASK}."
    assert mask_keys(KEY_PREFIX + "short") == KEY_PREFIX + "short"
    assert mask_keys("no key here") == "no key here"


def _files(*paths: Path) -> bytes:
    return b"".join(p.read_bytes() for path in paths for p in path.parent.glob(path.name + "*") if p.is_file())


def test_keys_and_the_master_key_are_masked_in_records_pages_logs_and_files(tmp_path: Path) -> None:
    master = "mk-" + secrets.token_urlsafe(24)
    db, log = tmp_path / "gw.sqlite", tmp_path / "log.sqlite"
    config = tmp_path / "plugins.yaml"
    config.write_text(
        f"plugins:\n  prompt-log: {{path: '{log}'}}\n  gateway:\n    database: {db}\n"
        "    master_key: ${{ env.GW_MASTER }}\n  mock: {}\ndefaults: {route: mock, model: echo}\n",
        encoding="utf-8",
    )
    process = Process(config, "--log-level", "debug", env={"GW_MASTER": master})
    try:
        with httpx.Client(base_url=process.url, timeout=60) as http:
            made = http.post("/admin/keys", json={"name": "pasted"}, headers={"authorization": f"Bearer {master}"})
            assert made.status_code == 201, made.text
            fresh = made.json()["key"]
            auth = {"authorization": f"Bearer {fresh}"}
            prompt = f"my key is {fresh} and the master is {master} ok"
            body = {"model": "mock/echo", "messages": [{"role": "user", "content": prompt}]}
            reply = http.post("/v1/chat/completions", json=body, headers=auth)
            assert reply.status_code == 200, reply.text
            assert fresh in reply.json()["choices"][0]["message"]["content"]  # the echo did carry both
            streamed = http.post("/v1/chat/completions", json={**body, "stream": True}, headers=auth)
            assert streamed.status_code == 200
            odd = http.post("/v1/chat/completions", json={**body, "model": f"mock/{fresh}"}, headers=auth)
            assert odd.status_code in (200, 404)
            assert http.get(f"/v1/nothing/{fresh}/{master}").status_code == 404  # the access log has the path
            console = {"authorization": f"Bearer {master}"}

            def recorded() -> bool:
                return http.get("/console/requests", headers=console).text.count('href="/console/requests/') >= 3

            wait_until(recorded)
            listing = http.get("/console/requests", headers=console).text
            tickets = KEY_PATTERN.sub("", listing)
            pages = [listing, http.get("/console/traffic", headers=console).text]
            pages += [http.get("/console/spend?by=model", headers=console).text]
            for ticket in {t.split('"')[0] for t in tickets.split('href="/console/requests/')[1:]}:
                inspected = http.get(f"/console/requests/{ticket}", headers=console)
                assert inspected.status_code == 200
                pages.append(inspected.text)
            assert any(MASK in page for page in pages)  # the prompt is shown, masked
    finally:
        process.stop()
    logged = "".join(process.seen)
    assert "GET /v1/nothing/" in logged
    stored = _files(db, log)
    assert b"my key is" in _files(db)  # the console records hold the prompt ...
    assert b"my key is" in _files(log)  # ... and so does the prompt log ...
    for secret in (fresh, master):
        assert secret not in logged  # ... but neither secret, nor does the log
        assert secret.encode() not in stored
        for page in pages:
            assert secret not in page
