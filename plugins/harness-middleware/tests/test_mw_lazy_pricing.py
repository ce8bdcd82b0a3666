"""The price table (genai-prices, with pydantic) is imported only when a lookup needs it: never for
the built-in mock's route, an override or a route kept out of the table; a priced model still gets
the table's cost, in the prompt log too (through `harness run`, in a fresh interpreter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from test_mw_promptlog import script_usage, sse_reply

from harness_core.testing import ScriptedServer
from harness_core.types import TokenUsage
from harness_middleware.pricing import UNPRICED_ROUTES, Price, PriceBook, _price_from_table

USAGE = TokenUsage(input_tokens=1_000_000, output_tokens=1_000_000)


def test_the_mock_route_is_unpriced_as_the_table_would_say() -> None:
    """Skipping the table for the mock changes no cost: the table has no row for its model."""
    assert "mock" in UNPRICED_ROUTES
    assert _price_from_table(USAGE, "mock", "echo", named=False, at=None) is None
    assert PriceBook().cost("mock", "echo", USAGE) is None


def test_an_unpriced_route_can_still_be_mapped_or_overridden() -> None:
    mapped = PriceBook(providers={"mock": "openai"}).cost("mock", "gpt-4o-mini", USAGE)
    assert mapped is not None
    assert mapped.price_id == "openai/gpt-4o-mini"
    override = PriceBook({"mock/echo": Price(input=1, output=2)}).cost("mock", "echo", USAGE)
    assert override is not None
    assert (override.total, override.source) == (Decimal(3), "config")


def in_fresh_interpreter(code: str) -> str:
    """stdout of ``code`` run by a new interpreter (no module of this test process loaded)."""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    return result.stdout.strip()


def test_the_table_is_imported_by_the_first_lookup_that_needs_it() -> None:
    code = (
        "import sys\n"
        "from harness_core.types import TokenUsage\n"
        "from harness_middleware.pricing import Price, PriceBook\n"
        "usage = TokenUsage(input_tokens=10, output_tokens=5)\n"
        "book = PriceBook({'local/m1': Price(input=1, output=2)}, {'off': None})\n"
        "assert book.cost('mock', 'echo', usage) is None\n"
        "assert book.cost('local', 'm1', usage) is not None\n"
        "assert book.cost('off', 'gpt-4o-mini', usage) is None\n"
        "print('genai_prices' in sys.modules, 'pydantic' in sys.modules)\n"
        "assert book.cost('openai', 'gpt-4o-mini', usage) is not None\n"
        "print('genai_prices' in sys.modules)\n"
    )
    assert in_fresh_interpreter(code).splitlines() == ["False False", "True"]


def cli_modules(tmp_path: Path, *args: str) -> tuple[set[str], str]:
    """(modules imported, stdout) of `harness *args` run in a fresh interpreter in ``tmp_path``."""
    code = (
        "import sys\n"
        "from harness_core.cli import main\n"
        f"try:\n    main({list(args)!r})\nexcept SystemExit as exc:\n    assert not exc.code, exc.code\n"
        "print(' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    env = dict(os.environ)
    env.pop("HARNESS_CONFIG", None)
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return set(result.stderr.splitlines()[-1].split()), result.stdout


def logged(tmp_path: Path) -> dict[str, object]:
    code = (
        "import json\n"
        "from harness_middleware.promptlog import PromptLog, default_log_path\n"
        "[entry] = PromptLog(default_log_path()).entries(limit=1)\n"
        "print(json.dumps({'cost': entry.cost, 'source': entry.price_source, 'route': entry.route}))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)
    entry: dict[str, object] = json.loads(result.stdout)
    return entry


def test_run_on_the_mock_logs_without_the_price_table(tmp_path: Path) -> None:
    modules, stdout = cli_modules(tmp_path, "run", "-r", "mock", "hello there")
    assert stdout == "hello there\n"
    assert "harness_middleware.promptlog" in modules  # the prompt log ran ...
    assert not {name for name in modules if name.startswith(("genai_prices", "pydantic", "httpx2"))}
    assert logged(tmp_path) == {"cost": None, "source": None, "route": "mock"}  # ... and stored no cost, as before


def test_run_on_a_priced_model_logs_the_table_cost(tmp_path: Path) -> None:
    pytest.importorskip("harness_llm_openai")
    with ScriptedServer(sse_reply("priced", "gpt-4o-mini", 1000, 200)) as server:
        (tmp_path / "plugins.yaml").write_text(
            f"plugins:\n  openai:\n    base_url: {server.url}/v1\n    api_key: null\n"
            "defaults: {route: openai, model: gpt-4o-mini}\n"
        )
        modules, stdout = cli_modules(tmp_path, "run", "hi")
    assert stdout == "priced\n"
    assert "genai_prices" in modules
    expected = PriceBook().cost("openai", "gpt-4o-mini", script_usage(1000, 200))
    assert expected is not None
    entry = logged(tmp_path)
    assert entry["cost"] == pytest.approx(float(expected.total))
    assert entry["source"] == expected.source
