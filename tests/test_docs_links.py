"""Every relative link in the README and docs/*.md (and CONTRIBUTING.md) names a file that exists in the tree."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)


def broken_links(page: Path, text: str) -> list[str]:
    """The relative link targets in `text` (markdown of `page`) that name no file or folder."""
    bad = []
    for target in LINK.findall(FENCE.sub("", text)):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("#"):
            continue  # a URL (http:, mailto:, ...) or an anchor on the same page
        path = target.split("#", 1)[0].split("?", 1)[0]
        if not (page.parent / path).exists():
            bad.append(target)
    return bad


def test_every_relative_link_in_the_docs_points_at_a_file_in_the_tree():
    missing = {str(p.relative_to(ROOT)): broken_links(p, p.read_text()) for p in PAGES if p.exists()}
    assert {page: links for page, links in missing.items() if links} == {}


def test_the_check_finds_a_broken_link_and_passes_a_good_one():
    page = ROOT / "docs" / "page.md"
    text = (
        "[ok](training.md) ![fig](trace-viewer.png) [up](../README.md#set-up) [web](https://example.org/x.md) [here](#x)\n"
        "[gone](no-such-page.md) ![gone too](img/missing.png)\n```\n[in code](not-checked.md)\n```\n"
    )
    assert broken_links(page, text) == ["no-such-page.md", "img/missing.png"]
