"""``docs/`` is where the contract lives: every relative link in the docs and READMEs resolves
(file and heading), and no reference to the unshipped specification file is left anywhere."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def tracked(*patterns: str) -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", *patterns],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [ROOT / name for name in listed if (ROOT / name).is_file()]


def anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    found = set()
    for heading in re.findall(r"^#+\s+(.+)$", markdown, re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(slug)
    return found


@pytest.mark.parametrize("page", tracked("*.md"), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto: …
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        assert resolved.exists(), f"{page.relative_to(ROOT)}: broken link {target!r}"
        if anchor and resolved.suffix == ".md":
            assert anchor in anchors(resolved.read_text(encoding="utf-8")), f"{page.relative_to(ROOT)}: no #{anchor}"


def test_code_links_into_docs_resolve() -> None:
    for source in tracked("*.py"):
        for target in re.findall(r"(?<![\w/.-])docs/([\w\-]+\.md)(?:#([\w\-]+))?", source.read_text(encoding="utf-8")):
            page = ROOT / "docs" / target[0]
            assert page.exists(), f"{source.relative_to(ROOT)}: no docs/{target[0]}"
            if target[1]:
                assert target[1] in anchors(page.read_text(encoding="utf-8")), f"{source}: no #{target[1]}"


def test_no_reference_to_the_unshipped_specification_is_left() -> None:
    markers = ("SPEC " + "§", "SPEC" + "-NOTES")
    sources = [p for p in tracked() if p.suffix in (".py", ".md", ".yaml", ".toml") and p.name != "CHANGELOG.md"]
    offenders = [str(p.relative_to(ROOT)) for p in sources if any(m in p.read_text() for m in markers)]
    assert offenders == []
