"""The documentation stays usable: the README is the user's guide (under 300 lines, its
first two ``sh`` blocks the demo and the test command that .ci/run runs), and every
relative link of README.md and docs/*.md leads to a file, and to a heading there when it
names one (GitHub's anchors)."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: formatting dropped, lower case, punctuation removed
    (``–`` and ``:`` included), spaces turned into hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())
    text = text.replace("`", "").replace("*", "").lower()
    return "".join("-" if ch == " " else ch for ch in text
                   if ch in " -_" or unicodedata.category(ch)[0] in "LN")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} (.+)$", FENCE.sub("", path.read_text("utf-8")), re.M):
        slug = anchor(heading)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    return found


def links(path: Path) -> list[str]:
    text = re.sub(r"`[^`\n]*`", "", FENCE.sub("", path.read_text("utf-8")))
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t)]


def test_the_anchor_rule_is_githubs() -> None:
    assert anchor("Offer catalog (IteraGPU rates, D9–D10)") == "offer-catalog-iteragpu-rates-d9d10"
    assert anchor("What `cockpit check` warns about") == "what-cockpit-check-warns-about"
    assert anchor("Headless, tmux and systemd") == "headless-tmux-and-systemd"


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_leads_somewhere(path: Path) -> None:
    broken = []
    for target in links(path):
        file, _, name = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.is_file():
            broken.append(f"{target}: no such file")
        elif name and dest.suffix == ".md" and name not in anchors(dest):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{path.relative_to(ROOT)}:\n" + "\n".join(broken)


def test_the_readme_is_a_short_guide_that_links_the_docs() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    assert len(readme.splitlines()) < 300
    linked = {Path(t.partition("#")[0]).name for t in links(ROOT / "README.md")}
    unlinked = {p.name for p in DOCS[1:]} - linked
    assert not unlinked, f"docs the README does not link: {sorted(unlinked)}"


def test_the_first_two_sh_blocks_are_the_demo_and_the_test_command() -> None:
    blocks = re.findall(r"```sh\n(.*?)\n```", (ROOT / "README.md").read_text("utf-8"), re.S)
    assert "-m cockpit demo" in blocks[0]
    assert "-m pytest" in blocks[1]  # .ci/run runs this one word for word
