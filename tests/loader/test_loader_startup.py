"""What loading costs at start-up: the built-in default needs no YAML parser, and no config needs
importlib.metadata (entry points are read by harness_core.entrypoints)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from harness_core.config import parse_yaml
from harness_core.loader import BUILTIN_DEFAULT, BUILTIN_SOURCE
from harness_core.loader.find import builtin_document

FAKE_PLUGINS = Path(__file__).parent / "fakeplugins"


def test_the_builtin_document_is_what_parsing_the_builtin_default_gives() -> None:
    assert builtin_document() == parse_yaml(BUILTIN_DEFAULT, source=BUILTIN_SOURCE)
    first, second = builtin_document()[0], builtin_document()[0]
    first["plugins"]["mock"]["changed"] = True  # every call builds it anew
    assert second == {"plugins": {"mock": {}}, "defaults": {"route": "mock", "model": "echo"}}


def loaded_modules(tmp_path: Path, config: str | None) -> list[str]:
    """The YAML / metadata modules a fresh interpreter imported to load ``config`` (plugins.yaml
    text; ``None``: no file, the built-in default) in ``tmp_path``, after checking what it loaded."""
    if config is not None:
        (tmp_path / "plugins.yaml").write_text(config)
    code = (
        "import sys\n"
        "from harness_core.loader import load_config\n"
        "loaded = load_config()\n"
        "assert [p.key for p in loaded.plugins] == ['mock'], loaded\n"
        "assert (loaded.defaults.route, loaded.defaults.model) == ('mock', 'echo'), loaded.defaults\n"
        "assert loaded.line('defaults', 'model') == 5\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(('yaml', 'importlib.metadata')))))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "HARNESS_CONFIG"}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env, check=True
    )
    return result.stdout.split()


def test_the_builtin_default_loads_without_yaml_or_importlib_metadata(tmp_path: Path) -> None:
    assert loaded_modules(tmp_path, None) == []


def test_a_config_file_is_parsed_as_yaml(tmp_path: Path) -> None:
    modules = loaded_modules(tmp_path, BUILTIN_DEFAULT)
    assert "yaml" in modules
    assert "importlib.metadata" not in modules
