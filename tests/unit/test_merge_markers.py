"""No file of the tree carries a merge's conflict markers (one reached README.md once)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(rb"^(<{7}|={7}|>{7})( |$)", re.MULTILINE)
SKIP = {".git", ".venv", "venv", "build", "node_modules", "__pycache__", ".mypy_cache",
        ".ruff_cache", ".pytest_cache", ".hypothesis"}  # fmt: skip
TEXT = {".py", ".md", ".toml", ".yml", ".yaml", ".cfg", ".txt", ".sh", ".lark", ".json", ""}


def _files() -> list[Path]:
    found = []
    for path in ROOT.rglob("*"):
        if any(part in SKIP or part.endswith(".egg-info") for part in path.relative_to(ROOT).parts):
            continue
        if path.is_file() and path.suffix in TEXT:
            found.append(path)
    return found


def test_no_file_has_conflict_markers() -> None:
    files = _files()
    assert any(p.name == "README.md" for p in files)
    marked = [str(p.relative_to(ROOT)) for p in files if MARKER.search(p.read_bytes())]
    assert marked == []
