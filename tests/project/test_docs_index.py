"""docs/index.md indexes every page of docs/ by job, docs/records/README.md lists every
record, and the README points at the index and at the page that says what every interval
promises."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
RECORDS = DOCS / "records"
#: a Markdown link's target: a path, optionally with an #anchor
LINK = re.compile(r"\]\(([^)#\s]+)(?:#([^)\s]+))?\)")


def _links(text: str) -> list[tuple[str, str | None]]:
    return [(m.group(1), m.group(2)) for m in LINK.finditer(text)]


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but hyphens dropped, spaces
    to hyphens."""
    text = heading.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    heads = re.findall(r"^#+ (.+)$", path.read_text(encoding="utf-8"), flags=re.M)
    return {_slug(h) for h in heads}


def test_the_index_links_every_docs_page_and_every_link_exists():
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    links = _links(index)
    pages = {p.name for p in DOCS.glob("*.md") if p.name not in ("README.md", "index.md")}
    linked_pages = {t for t, _ in links if "/" not in t and t.endswith(".md")}
    assert linked_pages == pages  # every page, no dead page link
    for target, anchor in links:
        path = (DOCS / target).resolve()
        assert path.exists(), target
        if anchor is not None:
            assert anchor in _anchors(path), (target, anchor)
    assert ("records/README.md", None) in links


def test_the_index_serves_the_four_jobs_and_the_reference_pages():
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    for page in ("dp-check.md", "users.md", "statistics.md", "bad-inputs.md", "gate.md"):
        assert f"]({page})" in index, page
    assert "](../README.md#resultsjson-schema)" in index
    assert len(re.findall(r"^## \d\. ", index, flags=re.M)) == 4


def test_docs_readme_only_points_at_the_index():
    text = (DOCS / "README.md").read_text(encoding="utf-8")
    assert _links(text) == [("index.md", None)]


def test_the_records_table_lists_every_record_once_and_each_exists():
    table = (RECORDS / "README.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| \[`([^`]+)`\]\(([^)]+)\) \|", table, flags=re.M)
    assert all(name == target for name, target in rows)
    listed = sorted(name for name, _ in rows)
    files = sorted(
        str(p.relative_to(RECORDS))
        for p in RECORDS.rglob("*")
        if p.is_file() and p.name != "README.md"
    )
    assert listed == files  # each record once, no dead row


def test_the_readme_links_the_docs_index_and_the_statistics_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(docs/index.md)" in readme.split("\n## ")[0]  # at the top, before any section
    assert "(docs/statistics.md)" in readme
