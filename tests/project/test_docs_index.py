"""docs/README.md indexes every page of docs/, and the README points at it and at the page
that says what every interval promises."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_docs_page_is_indexed_once_and_every_link_exists():
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#]+\.md)\)", index)
    pages = sorted(p.name for p in (ROOT / "docs").glob("*.md") if p.name != "README.md")
    assert sorted(links) == pages  # each page once, no dead link


def test_the_readme_links_the_docs_index_and_the_statistics_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(docs/README.md)" in readme
    assert "(docs/statistics.md)" in readme
