"""Keys, 401 / 403 / 429, budgets and the admin API against a real gateway (SQLite state)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import anthropic
import anyio
import httpx
import openai
import pytest
from click.testing import CliRunner
from gw_helpers import Clients, gateway_yaml, serve_gateway, store_expiries

from harness_core.cli._app import cli
from harness_gateway import cli as keys_cli
from harness_gateway.keys import KeySpec
from harness_gateway.sqlite import SQLiteStore

MASTER = "master-" + "x" * 24  # built at run time: no key-shaped literal committed
HI = [{"role": "user", "content": "hi"}]


@pytest.fixture
def gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("GW_MASTER", MASTER)
    settings = (
        "    require_keys: true\n"
        "    master_key: ${{ env.GW_MASTER }}\n"
        "    prices: {mock/echo: {input: 1000000, output: 1000000}}\n"
        "    aliases: {fast: mock/echo, also: other/echo}\n"  # 1 USD per token: "hi" costs 2 USD
    )
    yaml_text = gateway_yaml(settings, "  mock:other: {routes: [other]}", db=tmp_path / "gw.sqlite")
    with serve_gateway(tmp_path, yaml_text) as running:
        yield running


def create_key(running, *args: str) -> str:  # type: ignore[no-untyped-def]
    result = CliRunner().invoke(cli, ["keys", "create", "-c", str(running.config), *args])
    assert result.exit_code == 0, result.output
    return result.stdout.strip()


@pytest.fixture
def clients(gateway):  # type: ignore[no-untyped-def]
    opened = Clients(gateway.url)
    yield opened
    opened.close()


def test_missing_and_invalid_keys_are_401_in_both_shapes(gateway, clients) -> None:  # type: ignore[no-untyped-def]
    response = httpx.post(gateway.url + "/v1/chat/completions", json={"model": "mock/echo", "messages": HI})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "missing_api_key"
    assert response.headers["x-request-id"]
    with pytest.raises(openai.AuthenticationError):
        clients.openai("hk-wrong").chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]
    with pytest.raises(anthropic.AuthenticationError) as caught:
        clients.anthropic("hk-wrong").messages.create(
            model="mock/echo",
            max_tokens=10,
            messages=HI,  # type: ignore[arg-type]
        )
    assert caught.value.body["error"]["type"] == "authentication_error"  # type: ignore[index]


def test_key_created_on_the_cli_is_stored_as_a_hash(gateway, clients, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    key = create_key(gateway, "--name", "team-a")
    assert key.startswith("hk-")
    reply = clients.openai(key).chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]
    assert reply.choices[0].message.content == "hi"
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("gw.sqlite*"))
    assert key.encode() not in stored
    listing = CliRunner().invoke(cli, ["keys", "list", "-c", str(gateway.config)])
    assert "team-a" in listing.stdout
    assert key not in listing.stdout


def test_route_not_allowed_is_403(gateway, clients) -> None:  # type: ignore[no-untyped-def]
    key = create_key(gateway, "--name", "only-other", "--routes", "other")
    with pytest.raises(openai.PermissionDeniedError) as caught:
        clients.openai(key).chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]
    assert "route 'mock'" in caught.value.message
    ok = clients.openai(key).chat.completions.create(model="other/echo", messages=HI)  # type: ignore[arg-type]
    assert ok.choices[0].message.content == "hi"
    assert [m.id for m in clients.openai(key).models.list()] == [
        "other/echo",
        "other/hash",
        "also",
    ]  # its embedding model too
    assert clients.openai(key).models.retrieve("other/echo").id == "other/echo"
    with pytest.raises(openai.NotFoundError):  # a model of a route the key may not use is not shown to it
        clients.openai(key).models.retrieve("mock/echo")
    unauthenticated = httpx.get(gateway.url + "/v1/models", headers={"anthropic-version": "2023-06-01"})
    assert unauthenticated.status_code == 401
    assert unauthenticated.json()["type"] == "error"


def test_rpm_limit_is_429_with_retry_after(gateway, clients) -> None:  # type: ignore[no-untyped-def]
    key = create_key(gateway, "--name", "slow", "--rpm", "2")
    client = clients.openai(key)
    for _ in range(2):
        client.chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]
    assert 1 <= int(caught.value.response.headers["retry-after"]) <= 61  # a request counts 60-61 s
    with pytest.raises(anthropic.RateLimitError) as anth:
        clients.anthropic(key).messages.create(
            model="mock/echo",
            max_tokens=10,
            messages=HI,  # type: ignore[arg-type]
        )
    assert anth.value.body["error"]["type"] == "rate_limit_error"  # type: ignore[index]


def test_tpm_limit(gateway, clients) -> None:  # type: ignore[no-untyped-def]
    key = create_key(gateway, "--name", "tokens", "--tpm", "3")
    client = clients.openai(key)
    client.chat.completions.create(model="mock/echo", messages=[{"role": "user", "content": "a b c"}])
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]
    assert "tokens per minute" in caught.value.message


def test_budget_admits_exactly_n_requests(gateway, clients) -> None:  # type: ignore[no-untyped-def]
    key = create_key(gateway, "--name", "budget", "--budget", "6")  # 3 requests of 2 USD
    client = clients.openai(key)
    for _ in range(3):
        client.chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]
    with pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]
    assert caught.value.code == "insufficient_quota"
    listing = CliRunner().invoke(cli, ["keys", "list", "-c", str(gateway.config), "--json"])
    assert '"spent": 6.0' in listing.stdout


def test_a_spent_budget_is_not_retryable_in_either_dialect(gateway) -> None:  # type: ignore[no-untyped-def]
    """No ``retry-after``; ``x-should-retry: false``, which both SDKs honour (one attempt although
    they may retry three times); OpenAI's ``insufficient_quota`` 429, Anthropic's 402 ``billing_error``."""
    key = create_key(gateway, "--name", "spent team", "--budget", "2")  # one request of 2 USD
    attempts: list[str] = []
    hooks = {"request": [lambda request: attempts.append(request.url.path)]}
    # each SDK's own httpx client class (the OpenAI SDK ships its own httpx), counting every attempt
    with (
        openai.DefaultHttpxClient(event_hooks=hooks) as openai_http,
        anthropic.DefaultHttpxClient(event_hooks=hooks) as http,
    ):
        client = openai.OpenAI(base_url=gateway.url + "/v1", api_key=key, max_retries=3, http_client=openai_http)
        client.chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]
        with pytest.raises(openai.RateLimitError) as caught:
            client.chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]
        assert (caught.value.code, caught.value.type) == ("insufficient_quota", "insufficient_quota")
        assert "retry-after" not in caught.value.response.headers
        assert caught.value.response.headers["x-should-retry"] == "false"
        messages = anthropic.Anthropic(base_url=gateway.url, api_key=key, max_retries=3, http_client=http)
        with pytest.raises(anthropic.APIStatusError) as refused:
            messages.messages.create(model="mock/echo", max_tokens=10, messages=HI)  # type: ignore[arg-type]
        assert refused.value.status_code == 402
        assert refused.value.body["error"]["type"] == "billing_error"  # type: ignore[index]
        assert "has spent its budget" in refused.value.message
        # each says how to get unstuck: raise the key's budget, by its name (never its value)
        shown = caught.value.response.json()["error"]["message"]
        assert shown == (
            "key 'spent team' has spent its budget of $2 ($2 spent): not retryable with this key until an admin"
            " raises its budget (`harness keys update 'spent team' --budget <USD>`, or `PATCH /admin/keys/spent%20team`"
            ' with `{"budget": <USD>}`)'
        )
        assert key not in caught.value.response.text
        assert refused.value.body["error"]["message"] == shown  # type: ignore[index]
        raised = CliRunner().invoke(cli, ["keys", "update", "spent team", "--budget", "4", "-c", str(gateway.config)])
        assert raised.exit_code == 0, raised.output  # the command the message names, as it names it
        client.chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]  # admitted again
    assert attempts == ["/v1/chat/completions"] * 2 + ["/v1/messages", "/v1/chat/completions"]  # no retry of a refusal
    # the metrics count each refusal with the status its client was answered (402 on Messages)
    scraped = httpx.get(gateway.url + "/metrics", headers={"authorization": f"Bearer {MASTER}"}).text
    assert 'harness_gateway_requests_total{api="anthropic",model="-",route="-",status="402"} 1.0' in scraped
    assert 'api="anthropic",model="-",route="-",status="429"' not in scraped
    assert 'harness_gateway_requests_total{api="openai",model="-",route="-",status="429"} 1.0' in scraped


def test_admin_api_creates_lists_and_revokes(gateway, clients) -> None:  # type: ignore[no-untyped-def]
    admin = {"authorization": f"Bearer {MASTER}"}
    anonymous = httpx.get(gateway.url + "/admin/keys")
    assert (anonymous.status_code, anonymous.json()["error"]["code"]) == (401, "missing_api_key")  # as elsewhere
    wrong = httpx.get(gateway.url + "/admin/keys", headers={"authorization": "Bearer hk-wrong"})
    assert (wrong.status_code, wrong.json()["error"]["code"]) == (401, "invalid_api_key")
    created = httpx.post(gateway.url + "/admin/keys", json={"name": "ci", "rpm": 5}, headers=admin)
    assert created.status_code == 201
    key = created.json()["key"]
    assert clients.openai(key).chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]
    listed = httpx.get(gateway.url + "/admin/keys", headers=admin).json()["data"]
    assert [k["name"] for k in listed] == ["ci"]
    assert key not in str(listed)
    bad = httpx.post(gateway.url + "/admin/keys", json={"name": "x", "rpm": -1}, headers=admin)
    assert bad.status_code == 400
    assert bad.json()["error"]["param"] == "rpm"
    for body, param in (
        ({}, "name"),  # the field missing
        ({"rpm": 5}, "name"),
        ({"name": "a\nforged  row"}, "name"),
        ({"name": "nul\u0000"}, "name"),
        ({"name": "bidi\u202e"}, "name"),
        ({"name": "x", "tpm": "many"}, "tpm"),
        ({"name": "x", "expires": 3}, "expires"),
        ({"name": "x", "expires_days": 1, "expires_at": 2e9}, "expires_at"),
    ):
        refused = httpx.post(gateway.url + "/admin/keys", json=body, headers=admin)
        assert refused.status_code == 400, body
        assert refused.json()["error"]["param"] == param, refused.text
    expires = httpx.post(gateway.url + "/admin/keys", json={"name": "x", "expires": 3}, headers=admin)
    assert "expires_days, or expires_at in unix seconds" in expires.json()["error"]["message"]
    dated = httpx.post(gateway.url + "/admin/keys", json={"name": "dated", "expires_at": 4e9}, headers=admin)
    assert dated.status_code == 201
    assert dated.json()["expires_at"] == 4e9
    assert httpx.delete(gateway.url + "/admin/keys/dated", headers=admin).json() == {"revoked": 1}
    assert httpx.delete(gateway.url + "/admin/keys/ci", headers=admin).json() == {"revoked": 1}
    assert httpx.delete(gateway.url + "/admin/keys/ci", headers=admin).status_code == 404
    with pytest.raises(openai.AuthenticationError) as caught:
        clients.openai(key).chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]
    assert "revoked" in caught.value.message
    # the master key itself may call every route
    assert clients.openai(MASTER).chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]


def test_keys_revoke_on_the_cli(gateway, clients) -> None:  # type: ignore[no-untyped-def]
    key = create_key(gateway, "--name", "gone")
    result = CliRunner().invoke(cli, ["keys", "revoke", "-c", str(gateway.config), "gone"])
    assert result.exit_code == 0
    again = CliRunner().invoke(cli, ["keys", "revoke", "-c", str(gateway.config), "gone"])
    assert again.exit_code == 2
    with pytest.raises(openai.AuthenticationError):
        clients.openai(key).chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]


def test_key_names_are_unique_and_a_revoke_takes_one_key(gateway, clients) -> None:  # type: ignore[no-untyped-def]
    admin = {"authorization": f"Bearer {MASTER}"}
    first = create_key(gateway, "--name", "team")
    taken = CliRunner().invoke(cli, ["keys", "create", "-c", str(gateway.config), "--name", "team"])
    assert taken.exit_code == 2  # a usage problem (like an unknown key or route); an unavailable store is 1
    assert "a live key named 'team' exists" in taken.output
    again = httpx.post(gateway.url + "/admin/keys", json={"name": "team"}, headers=admin)
    assert (again.status_code, again.json()["error"]["code"]) == (409, "key_name_taken")
    store = SQLiteStore(gateway.config.parent / "gw.sqlite")

    async def duplicate() -> list[str]:  # a store written before names were unique may hold two
        try:  # (schema 5 renames such duplicates and then refuses them: an index-less store stands in)
            await store.transaction(lambda tx: tx.run("DROP INDEX gateway_keys_live_name"))
            await store.transaction(lambda tx: tx.run("UPDATE gateway_keys SET name = 'team-b' WHERE name = 'team'"))
            await store.create_key(KeySpec(name="team"))
            await store.transaction(lambda tx: tx.run("UPDATE gateway_keys SET name = 'team'"))
            return [k.id for k in await store.list_keys()]
        finally:
            await store.aclose()

    ids = anyio.run(duplicate)
    ambiguous = CliRunner().invoke(cli, ["keys", "revoke", "-c", str(gateway.config), "team"])
    assert ambiguous.exit_code != 0
    assert f"2 live keys are named 'team' (ids {', '.join(sorted(ids))}): revoke one by its id" in ambiguous.output
    refused = httpx.delete(gateway.url + "/admin/keys/team", headers=admin)
    assert (refused.status_code, refused.json()["error"]["code"]) == (409, "key_name_ambiguous")
    by_id = CliRunner().invoke(cli, ["keys", "revoke", "-c", str(gateway.config), ids[1]])
    assert by_id.stdout.strip() == "revoked 1 key"
    assert clients.openai(first).chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]
    by_name = CliRunner().invoke(cli, ["keys", "revoke", "-c", str(gateway.config), "team"])  # the one left
    assert by_name.stdout.strip() == "revoked 1 key"
    with pytest.raises(openai.AuthenticationError):
        clients.openai(first).chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]
    assert create_key(gateway, "--name", "team").startswith("hk-")  # a revoked key's name is free again


def test_a_key_may_only_name_served_routes(gateway) -> None:  # type: ignore[no-untyped-def]
    refused = CliRunner().invoke(
        cli, ["keys", "create", "-c", str(gateway.config), "--name", "n", "--routes", "mock,nope"]
    )
    assert refused.exit_code == 2
    assert "--routes: 'nope' not served by this gateway (served: mock, other)" in refused.output
    typo = CliRunner().invoke(
        cli, ["keys", "create", "-c", str(gateway.config), "--name", "n", "--routes", "mokc,othr,nope"]
    )  # the closest served route of each, as the gateway's unknown model and `harness run -r` say it
    assert typo.exit_code == 2
    assert typo.output.splitlines()[-1] == (
        "error: --routes: 'mokc' (did you mean 'mock'?), 'othr' (did you mean 'other'?), 'nope' not served by "
        "this gateway (served: mock, other)"
    )
    admin = {"authorization": f"Bearer {MASTER}"}
    bad = httpx.post(gateway.url + "/admin/keys", json={"name": "n", "routes": ["nope", "gone"]}, headers=admin)
    assert bad.status_code == 400
    assert bad.json()["error"]["param"] == "routes"
    assert bad.json()["error"]["message"].startswith("routes: 'nope', 'gone' not served by this gateway")
    empty = httpx.post(gateway.url + "/admin/keys", json={"name": "n", "routes": []}, headers=admin)
    assert (empty.status_code, empty.json()["error"]["param"]) == (400, "routes")
    nothing = CliRunner().invoke(cli, ["keys", "create", "-c", str(gateway.config), "--name", "n", "--routes", " , "])
    assert nothing.exit_code == 2
    assert "error: --routes: must name at least one route (leave it out for every route)" in nothing.output
    listing = CliRunner().invoke(cli, ["keys", "list", "-c", str(gateway.config)])
    assert " n " not in listing.stdout  # nothing was created


@pytest.mark.parametrize("command", [["create", "--name", "n"], ["update", "some-key"]])
def test_keys_routes_on_a_broken_or_missing_config_is_the_located_error_exit_2(
    tmp_path: Path, command: list[str]
) -> None:
    """``--routes`` reads the routes the config serves: a plugins.yaml that does not load is the
    located config error and exit 2, as every other command answers it, never a traceback."""
    broken = tmp_path / "plugins.yaml"
    broken.write_text(f"plugins:\n  gateway:\n    database: {tmp_path / 'gw.sqlite'}\n  mock: [\n", encoding="utf-8")
    missing = tmp_path / "absent.yaml"
    cases = ((broken, "plugins.yaml:5: invalid YAML"), (missing, "absent.yaml: cannot read the config file"))
    for config, says in cases:
        result = CliRunner().invoke(cli, ["keys", command[0], "-c", str(config), *command[1:], "--routes", "mock"])
        assert result.exit_code == 2, result.output
        assert isinstance(result.exception, SystemExit)  # a click error, not an escaped ConfigError
        assert "Traceback" not in result.output
        assert result.output.startswith("error: CONFIG: invalid configuration (1 problem):\n")
        assert says in result.output
    assert not (tmp_path / "gw.sqlite").exists()  # nothing was written


def test_numbers_no_store_holds_and_expiries_no_date_shows_are_refused_naming_the_field(gateway) -> None:  # type: ignore[no-untyped-def]
    """They were a 500 (SQLite's OverflowError, a traceback on the CLI) or were stored and then broke
    the key list and the console; an expiry in the past made a key that never worked."""
    admin = {"authorization": f"Bearer {MASTER}", "content-type": "application/json"}
    latest = "9999-12-31 23:59:59 UTC, the latest expiry a key may have"
    for body, param, message in (
        ('{"name": "t1", "tpm": 99999999999999999999999}', "tpm", "tpm must be at most 2147483647"),
        ('{"name": "t2", "rpm": 9223372036854775808}', "rpm", "rpm must be at most 2147483647"),
        ('{"name": "t3", "rpm": 2147483648}', "rpm", "what every state store can hold"),  # not PostgreSQL's INTEGER
        ('{"name": "t4", "tpm": 1' + "0" * 400 + "}", "tpm", "tpm must be at most 2147483647"),
        ('{"name": "b1", "budget": 1' + "0" * 400 + "}", "budget", "Number out of range"),  # beyond a float
        ('{"name": "e1", "expires_days": 1e9}', "expires_days", f"days from now: {latest}; got 1000000000.0"),
        ('{"name": "e2", "expires_at": 1e300}', "expires_at", f"at most 253402300799: {latest}; got 1e+300"),
        ('{"name": "e3", "expires_at": 1}', "expires_at", "expires_at is in the past: 1.0 is 1970-01-01 00:00:01 UTC"),
    ):
        refused = httpx.post(gateway.url + "/admin/keys", content=body, headers=admin)
        assert refused.status_code == 400, body
        error = refused.json()["error"]
        assert (error["param"], error["code"], error["type"]) == (param, "invalid_request", "invalid_request_error")
        assert message in error["message"], error["message"]
    edge = {"name": "edge", "rpm": 2147483647, "tpm": 2147483647, "budget": 1e308, "expires_at": 253402300799}
    created = httpx.post(gateway.url + "/admin/keys", json=edge, headers=admin)
    assert created.status_code == 201, created.text  # the bounds themselves are kept
    assert {k: created.json()[k] for k in edge} == edge
    for args, message in (
        (["--tpm", "99999999999999999999999"], "error: --tpm: must be at most 2147483647, what every state store"),
        (["--rpm", "2147483648"], "error: --rpm: must be at most 2147483647"),
        (["--expires", "1e9"], "error: --expires: must be at most "),  # N days from now: by 9999-12-31
        (["--budget", "inf"], "error: --budget: must be a finite positive number, got inf"),
    ):
        result = CliRunner().invoke(cli, ["keys", "create", "-c", str(gateway.config), "--name", "cli", *args])
        assert result.exit_code == 2, result.output  # a usage error, as a taken name: no traceback
        assert isinstance(result.exception, SystemExit)
        assert result.output.splitlines()[-1].startswith(message), result.output
    listing = CliRunner().invoke(cli, ["keys", "list", "-c", str(gateway.config)])
    assert listing.exit_code == 0, listing.output
    assert [line.split()[1] for line in listing.stdout.splitlines()[1:]] == ["edge"]  # nothing refused was stored
    assert "9999-12-31 23:59" in listing.stdout


def test_keys_list_shows_a_stored_expiry_no_date_shows(gateway) -> None:  # type: ignore[no-untyped-def]
    """A database written before expiries were bounded may hold one (``expires_days: 1e9`` stored
    8.64e13, ``expires_at: 1e300`` itself): listed as far future, never a crash."""
    admin = {"authorization": f"Bearer {MASTER}"}
    for name in ("days", "huge"):
        assert httpx.post(gateway.url + "/admin/keys", json={"name": name}, headers=admin).status_code == 201
    store_expiries(gateway.config.parent / "gw.sqlite", {"days": 8.64e13, "huge": 1e300})
    listing = CliRunner().invoke(cli, ["keys", "list", "-c", str(gateway.config)])
    assert listing.exit_code == 0, listing.output
    rows = {line.split()[1]: line for line in listing.stdout.splitlines()[1:]}
    assert rows["days"].endswith("far future (8.64e+13)")
    assert rows["huge"].endswith("far future (1e+300)")
    assert " active " in rows["huge"]  # it has not expired
    as_json = CliRunner().invoke(cli, ["keys", "list", "-c", str(gateway.config), "--json"])
    assert [k["expires_at"] for k in json.loads(as_json.stdout)] == [8.64e13, 1e300]
    assert [k["expires_at"] for k in httpx.get(gateway.url + "/admin/keys", headers=admin).json()["data"]] == [
        8.64e13,
        1e300,
    ]
    assert keys_cli._when(-1e300) == "far past (-1e+300)"  # no date either (no version stores one)


def test_expired_key_is_401(gateway, clients) -> None:  # type: ignore[no-untyped-def]
    store = SQLiteStore(gateway.config.parent / "gw.sqlite")
    spec = KeySpec(name="short", expires_days=1)

    async def create() -> str:
        try:
            return (await store.create_key(spec, now=time.time() - 2 * 86400))[0]
        finally:
            await store.aclose()

    key = anyio.run(create)
    listing = CliRunner().invoke(cli, ["keys", "list", "-c", str(gateway.config)])
    assert "expired" in listing.stdout
    with pytest.raises(openai.AuthenticationError) as caught:
        clients.openai(key).chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]
    assert caught.value.response.json()["error"]["message"] == "this API key has expired"


def test_a_revoked_key_is_refused_where_keys_are_optional(tmp_path: Path) -> None:
    """On loopback keys are optional (unknown keys are anonymous), but a revoked one is not."""
    with serve_gateway(tmp_path, gateway_yaml(db=tmp_path / "gw.sqlite")) as running:
        opened = Clients(running.url)
        try:
            key = create_key(running, "--name", "former")
            assert opened.openai(key).chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]
            assert opened.openai("hk-unknown").chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]
            revoked = CliRunner().invoke(cli, ["keys", "revoke", "-c", str(running.config), "former"])
            assert revoked.exit_code == 0, revoked.output
            with pytest.raises(openai.AuthenticationError) as caught:
                opened.openai(key).chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]
            assert "revoked" in caught.value.message
        finally:
            opened.close()


@pytest.mark.parametrize("required", [False, True])
def test_on_loopback_a_restricted_key_binds_only_a_client_that_sends_it(tmp_path: Path, required: bool) -> None:
    """docs/gateway.md "Keys on loopback": with keys optional, sending no key runs without the key's
    limits; ``require_keys: true`` closes that (no key → 401)."""
    gateway = "    require_keys: true" if required else ""
    with serve_gateway(tmp_path, gateway_yaml(gateway, db=tmp_path / "gw.sqlite")) as running:
        key = create_key(running, "--name", "limited", "--rpm", "1")
        url = running.url + "/v1/chat/completions"
        body = {"model": "mock/echo", "messages": HI}
        with httpx.Client(timeout=30) as client:
            with_key = [client.post(url, json=body, headers={"authorization": f"Bearer {key}"}) for _ in range(2)]
            assert [r.status_code for r in with_key] == [200, 429]
            without = client.post(url, json=body)
            assert without.status_code == (401 if required else 200)


def test_responses_spend_a_keys_budget_like_the_other_endpoints(gateway, clients) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(openai.AuthenticationError):
        clients.openai("hk-wrong").responses.create(model="mock/echo", input="hi")
    key = create_key(gateway, "--name", "agent", "--budget", "2")  # one request of 2 USD
    client = clients.openai(key)
    assert client.responses.create(model="mock/echo", input="hi").output_text == "hi"
    with pytest.raises(openai.RateLimitError) as caught:
        client.responses.create(model="mock/echo", input="hi")
    assert caught.value.code == "insufficient_quota"
    listing = CliRunner().invoke(cli, ["keys", "list", "-c", str(gateway.config), "--json"])
    assert '"spent": 2.0' in listing.stdout
    scraped = httpx.get(gateway.url + "/metrics", headers={"authorization": f"Bearer {MASTER}"}).text
    assert 'harness_gateway_requests_total{api="responses",model="echo",route="mock",status="complete"} 1.0' in scraped


def test_a_keys_budget_limits_name_and_routes_change_through_the_admin_api_and_the_cli(gateway, clients) -> None:  # type: ignore[no-untyped-def]
    admin = {"authorization": f"Bearer {MASTER}"}
    key = create_key(gateway, "--name", "grow", "--budget", "2")  # one request of 2 USD
    client = clients.openai(key)
    client.chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]
    with pytest.raises(openai.RateLimitError) as spent:
        client.chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]
    assert spent.value.code == "insufficient_quota"

    raised = httpx.patch(gateway.url + "/admin/keys/grow", json={"budget": 4}, headers=admin)
    assert raised.status_code == 200, raised.text
    assert (raised.json()["budget"], raised.json()["spent"], raised.json()["name"]) == (4.0, 2.0, "grow")
    client.chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]  # admitted at once
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]

    cli_args = ["keys", "update", "-c", str(gateway.config)]
    unlimited = CliRunner().invoke(cli, [*cli_args, "grow", "--budget", "none", "--rpm", "1", "--name", "grown"])
    assert unlimited.exit_code == 0, unlimited.output
    assert unlimited.stdout.strip().endswith("(grown): name, budget, rpm")
    client.chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]  # no budget now
    with pytest.raises(openai.RateLimitError) as limited:  # but one request a minute
        client.chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]
    assert limited.value.code == "rate_limit_exceeded"
    relaxed = CliRunner().invoke(cli, [*cli_args, "grown", "--rpm", "NONE", "--expires", "2"])
    assert relaxed.exit_code == 0, relaxed.output
    # (the gateway process's own change is seen at once; another process's change of routes
    # within KEY_TTL: its records of keys are reused that long, and only admission re-reads one)
    narrowed = httpx.patch(gateway.url + "/admin/keys/grown", json={"routes": ["other"]}, headers=admin)
    assert narrowed.json()["routes"] == ["other"]
    with pytest.raises(openai.PermissionDeniedError):  # routes: other only
        client.chat.completions.create(model="mock/echo", messages=HI)  # type: ignore[arg-type]
    assert client.chat.completions.create(model="other/echo", messages=HI)  # type: ignore[arg-type]
    [listed] = [k for k in httpx.get(gateway.url + "/admin/keys", headers=admin).json()["data"] if k["name"] == "grown"]
    assert (listed["routes"], listed["budget"], listed["rpm"]) == (["other"], None, None)
    assert 2 * 86400 - 60 < listed["expires_at"] - time.time() <= 2 * 86400
    both = CliRunner().invoke(cli, [*cli_args, "grown", "--routes", "mock, other"])
    assert both.exit_code == 0, both.output
    [listed] = [k for k in httpx.get(gateway.url + "/admin/keys", headers=admin).json()["data"] if k["name"] == "grown"]
    assert listed["routes"] == ["mock", "other"]
    back = CliRunner().invoke(cli, [*cli_args, "grown", "--routes", "none", "--expires", "none"])
    assert back.exit_code == 0, back.output
    [listed] = [k for k in httpx.get(gateway.url + "/admin/keys", headers=admin).json()["data"] if k["name"] == "grown"]
    assert (listed["routes"], listed["expires_at"]) == (None, None)
    assert key not in str(listed)


def test_a_key_change_is_refused_naming_the_field_and_changes_nothing(gateway) -> None:  # type: ignore[no-untyped-def]
    admin = {"authorization": f"Bearer {MASTER}"}
    create_key(gateway, "--name", "fixed", "--rpm", "5")
    create_key(gateway, "--name", "taken")
    url = gateway.url + "/admin/keys/fixed"
    assert httpx.patch(url, json={"rpm": 6}).status_code == 401
    for body, param in (
        ({"rpm": -1}, "rpm"),
        ({"rpm": "many"}, "rpm"),
        ({"budget": 0}, "budget"),
        ({"name": " "}, "name"),
        ({"routes": []}, "routes"),
        ({"routes": ["nope"]}, "routes"),
        ({"expires_at": 1.0}, "expires_at"),
        ({"expires_days": 1, "expires_at": 4e9}, "expires_at"),
        ({"spent": 0}, "spent"),  # a key's spend is not a setting
    ):
        refused = httpx.patch(url, json=body, headers=admin)
        assert refused.status_code == 400, (body, refused.text)
        assert refused.json()["error"]["param"] == param, refused.text
    assert "'mokc' (did you mean 'mock'?)" in httpx.patch(url, json={"routes": ["mokc"]}, headers=admin).text
    taken = httpx.patch(url, json={"name": "taken"}, headers=admin)
    assert (taken.status_code, taken.json()["error"]["code"]) == (409, "key_name_taken")
    [other] = [k for k in httpx.get(gateway.url + "/admin/keys", headers=admin).json()["data"] if k["name"] == "taken"]
    as_id = httpx.patch(url, json={"name": other["id"]}, headers=admin)  # it would address the other key
    assert (as_id.status_code, as_id.json()["error"]["param"]) == (409, "name")
    assert "is the id of a live key" in as_id.json()["error"]["message"]
    created = httpx.post(gateway.url + "/admin/keys", json={"name": other["id"]}, headers=admin)
    assert created.status_code == 409
    no_routes = httpx.patch(url, json={"routes": []}, headers=admin)
    assert "null, or `none` on the command line, for every route" in no_routes.json()["error"]["message"]
    assert httpx.patch(url, json={"name": "fixed"}, headers=admin).status_code == 200  # its own name is free
    assert httpx.patch(gateway.url + "/admin/keys/nope", json={"rpm": 1}, headers=admin).status_code == 404
    assert httpx.patch(url, content=b"{", headers=admin).status_code == 400
    [fixed] = [k for k in httpx.get(gateway.url + "/admin/keys", headers=admin).json()["data"] if k["name"] == "fixed"]
    assert (fixed["rpm"], fixed["budget"], fixed["routes"], fixed["expires_at"]) == (5, None, None, None)
    assert httpx.delete(url, headers=admin).status_code == 200
    revoked = httpx.patch(url, json={"rpm": 1}, headers=admin)  # a revoked key is not changed
    assert (revoked.status_code, revoked.json()["error"]["code"]) == (404, "key_not_found")

    cli_args = ["keys", "update", "-c", str(gateway.config)]
    for args, shown in (
        (["taken"], "nothing to change"),
        (["taken", "--rpm", "0"], "--rpm"),
        (["taken", "--budget", "-1"], "--budget"),
        (["taken", "--routes", "mokc"], "--routes: 'mokc' (did you mean 'mock'?)"),
        (["taken", "--name", "a\nb"], "--name: must be printable text"),
        (["fixed", "--rpm", "1"], "no live key with id or name 'fixed'"),
    ):
        result = CliRunner().invoke(cli, [*cli_args, *args])
        assert result.exit_code == 2, (args, result.output)
        assert shown in result.output, (args, result.output)


def test_an_expired_key_may_be_changed_and_a_new_expiry_must_be_ahead(gateway, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    admin = {"authorization": f"Bearer {MASTER}"}
    create_key(gateway, "--name", "old")
    store_expiries(gateway.config.parent / "gw.sqlite", {"old": 1000.0})  # expired long ago
    url = gateway.url + "/admin/keys/old"
    kept = httpx.patch(url, json={"budget": 5}, headers=admin)  # a kept expiry is not checked again
    assert (kept.status_code, kept.json()["expires_at"], kept.json()["budget"]) == (200, 1000.0, 5.0)
    renewed = httpx.patch(url, json={"expires_days": 1}, headers=admin)
    assert renewed.json()["expires_at"] > time.time()
    assert httpx.patch(url, json={"expires_at": None}, headers=admin).json()["expires_at"] is None
