"""harness_core.entrypoints: entry points and distribution name/version read from metadata folders,
agreeing with importlib.metadata, without importing it (or anything the entry points name)."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from harness_core import entrypoints
from harness_core.entrypoints import Distribution, EntryPoint, entry_points

FAKE_PLUGINS = Path(__file__).parent / "fakeplugins"


def dist_info(folder: Path, name: str, text: str, *, metadata: str | None = None, suffix: str = ".dist-info") -> Path:
    """A metadata folder ``name<suffix>`` in ``folder`` with ``entry_points.txt`` = ``text``."""
    info = folder / f"{name}{suffix}"
    info.mkdir(parents=True)
    (info / "entry_points.txt").write_text(text)
    if metadata is not None:
        (info / ("METADATA" if suffix == ".dist-info" else "PKG-INFO")).write_text(metadata)
    return info


def test_agrees_with_importlib_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(FAKE_PLUGINS))
    for group in ("harness.plugins", "harness.commands", "console_scripts"):
        expected: dict[str, importlib.metadata.EntryPoint] = {}
        for ep in importlib.metadata.entry_points(group=group):
            expected.setdefault(ep.name, ep)
        found = entry_points(group)
        assert {name: ep.value for name, ep in found.items()} == {name: ep.value for name, ep in expected.items()}
        for name, point in found.items():
            dist = expected[name].dist
            assert dist is not None
            assert (point.group, point.dist.name, point.dist.version) == (group, dist.metadata["Name"], dist.version)


def test_first_distribution_of_a_name_and_first_entry_point_of_a_name_win(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    dist_info(first, "demo_pkg-2.0", "[g]\na = mod_a:new\n", metadata="Name: demo-pkg\nVersion: 2.0\n")
    dist_info(second, "Demo.Pkg-1.0", "[g]\na = mod_a:old\nz = mod_z\n")  # same project, later: ignored
    dist_info(second, "other-1.0", "[g]\na = mod_b:shadowed\nb = mod_b:f [extra]\n[h]\nc = x:y\n")
    monkeypatch.syspath_prepend(str(second))
    monkeypatch.syspath_prepend(str(first))
    found = entry_points("g")
    assert {name: (ep.value, ep.dist.key) for name, ep in found.items()} == {
        "a": ("mod_a:new", "demo-pkg"),
        "b": ("mod_b:f [extra]", "other"),
    }
    assert (found["a"].dist.name, found["a"].dist.version) == ("demo-pkg", "2.0")
    assert (found["b"].dist.name, found["b"].dist.version) == (None, None)  # no METADATA file


def test_metadata_headers_egg_info_and_unreadable_folders(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    metadata = "Metadata-Version: 2.1\nName: egg-demo\nSummary: x\nVersion: 0.3\n\nName: not-a-header\n"
    dist_info(tmp_path, "egg_demo", "[g]\ne = m:f\n", metadata=metadata, suffix=".egg-info")
    (tmp_path / "flat-1.0.dist-info").mkdir()  # no entry_points.txt: no entry points
    (tmp_path / "legacy-1.0.egg-info").write_text("Name: legacy\n")  # a PKG-INFO file, not a folder
    (tmp_path / "unrelated.txt").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "missing"))
    monkeypatch.syspath_prepend(str(tmp_path))
    [(name, ep)] = entry_points("g").items()
    assert (name, ep.dist.key, ep.dist.name, ep.dist.version) == ("e", "egg-demo", "egg-demo", "0.3")
    assert repr(ep.dist) == f"Distribution({str(tmp_path / 'egg_demo.egg-info')!r})"


def test_the_current_directory_entry_of_sys_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    dist_info(tmp_path, "here-1.0", "[g]\nh = here:f\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend("")
    assert entry_points("g")["h"].dist.path == os.path.join(".", "here-1.0.dist-info")


def test_zip_archives_on_sys_path_are_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    archive = tmp_path / "plugins.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("zipped-1.5.dist-info/METADATA", "Name: Zipped\nVersion: 1.5\n")
        zf.writestr("zipped-1.5.dist-info/entry_points.txt", "[g]\nz = zipped_mod:obj\n")
        zf.writestr("plain-1.0.dist-info/METADATA", "Name: plain\nVersion: 1.0\n")
        zf.writestr("zipped_mod.py", "obj = 42\n")
    monkeypatch.syspath_prepend(str(archive))
    found = entry_points("g")
    assert (found["z"].dist.key, found["z"].dist.name, found["z"].dist.version) == ("zipped", "Zipped", "1.5")
    assert found["z"].load() == 42


def test_load_imports_the_module_and_its_attributes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "ep_target_mod.py").write_text("class Outer:\n    class Inner:\n        value = 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    dist = Distribution(str(tmp_path / "x.dist-info"), "x")
    assert EntryPoint("a", "ep_target_mod:Outer.Inner", "g", dist).load().value == 7
    assert EntryPoint("b", "ep_target_mod", "g", dist).load() is sys.modules["ep_target_mod"]
    assert EntryPoint("c", "ep_target_mod:Outer [extra]", "g", dist).load().Inner.value == 7
    with pytest.raises(AttributeError):
        EntryPoint("d", "ep_target_mod:Missing", "g", dist).load()
    with pytest.raises(ValueError, match=r"entry point 'e' of x is no `module:attr` reference: .not a reference!'"):
        EntryPoint("e", "not a reference!", "g", dist).load()


def test_reading_entry_points_imports_neither_importlib_metadata_nor_the_plugins() -> None:
    code = (
        "import sys\n"
        "from harness_core.entrypoints import entry_points\n"
        "eps = entry_points('harness.plugins')\n"
        "assert 'strict' in eps and eps['strict'].dist.version == '0.1.0'\n"
        "print(sorted(m for m in sys.modules if m.startswith(('importlib.metadata', 'email', 'harness_fake'))))\n"
    )
    env = {"PYTHONPATH": str(FAKE_PLUGINS), "PATH": ""}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert result.stdout == "[]\n"


def test_a_folder_is_read_again_only_when_its_distributions_change(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    opened: list[str] = []
    real_open = open

    def counting_open(path: str, *args: object, **kwargs: object) -> object:
        opened.append(str(path))
        return real_open(path, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(entrypoints, "open", counting_open, raising=False)
    dist_info(tmp_path, "one-1.0", "stray = before:any_section\n[g]\na = m:a\nno pair here\n")
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    assert {name: ep.value for name, ep in entry_points("g").items()} == {"a": "m:a"}
    assert {name: ep.value for name, ep in entry_points("other").items()} == {}
    assert len(opened) == 1  # one scan served both groups
    dist_info(tmp_path, "two-1.0", "[g]\nb = m:b\n")  # installed: the folder's listing changed
    assert sorted(entry_points("g")) == ["a", "b"]
    assert len(opened) == 3
