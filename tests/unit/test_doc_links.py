"""Every relative link in README.md and docs/**/*.md points at a file that exists, and a link
to a heading (``page.md#anchor``, ``#anchor``) at a heading that exists in that page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # http:, https:, mailto:


def pages(root: Path = ROOT) -> list[Path]:
    """README.md and every Markdown page under docs/."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def _prose(text: str) -> str:
    """``text`` without fenced code blocks and inline code, where links are not links."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of ``page`` (a repeated heading gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    """The relative links of ``page`` whose file (or heading) does not exist."""
    broken = []
    for target in LINK.findall(_prose(page.read_text(encoding="utf-8"))):
        if EXTERNAL.match(target):
            continue
        path_part, _, anchor = target.partition("#")
        where = (page.parent / path_part).resolve() if path_part else page
        rel = page.relative_to(root).as_posix()
        if not where.exists():
            broken.append(f"{rel}: {target} (no such file)")
        elif root.resolve() not in (where, *where.parents):
            broken.append(f"{rel}: {target} (outside the project)")
        elif anchor and where.suffix == ".md" and anchor not in anchors(where):
            broken.append(f"{rel}: {target} (no such heading)")
    return broken


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_the_check_reads_real_links() -> None:
    """The README links into docs/ (a pattern that matched nothing would pass vacuously)."""
    links = LINK.findall(_prose((ROOT / "README.md").read_text(encoding="utf-8")))
    assert "docs/results.md" in links
    assert len(pages()) >= 10


def test_a_planted_broken_link_is_found(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# Title here\n\n## Two `words`\n")
    readme = tmp_path / "README.md"
    readme.write_text(
        "[ok](docs/a.md) [ok](docs/a.md#two-words) [ok](#top) https://example.org\n"
        "[gone](docs/b.md) ![gone](docs/c.png) [bad](docs/a.md#nowhere)\n"
        "```\n[not a link](docs/d.md)\n```\n"
        "`[not a link](docs/e.md)`\n"
        "# Top\n"
    )
    assert broken_links(readme, tmp_path) == [
        "README.md: docs/b.md (no such file)",
        "README.md: docs/c.png (no such file)",
        "README.md: docs/a.md#nowhere (no such heading)",
    ]


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Application-bypass reduce (thesis ch. 3)", "application-bypass-reduce-thesis-ch-3"),
        (
            "MPI: `from emucluster import MPI` and `emurun --mpi4py`",
            "mpi-from-emucluster-import-mpi-and-emurun---mpi4py",
        ),
        ("Conformance: mpi4py's own tests", "conformance-mpi4pys-own-tests"),
    ],
)
def test_slug_follows_github(heading: str, anchor: str) -> None:
    assert slug(heading) == anchor


def test_every_figure_is_on_the_results_page() -> None:
    """docs/results.md shows every PNG of docs/figures (a new figure gets its paragraph)."""
    text = _prose((ROOT / "docs" / "results.md").read_text(encoding="utf-8"))
    shown = {Path(target).name for target in LINK.findall(text) if target.endswith(".png")}
    figures = {path.name for path in (ROOT / "docs" / "figures").glob("*.png")}
    assert figures - shown == set()
