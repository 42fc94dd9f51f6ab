"""``emubench.docgen``: the committed generated tables match the code, and a stale or broken
page is caught (a planted edit, a missing or unbalanced marker, an undescribed variable)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from emubench import docgen
from launcher.cli import build_parser

ROOT = Path(__file__).resolve().parents[3]


def test_the_committed_pages_are_current() -> None:
    """If this fails, run ``python -m emubench.docgen`` and commit the pages it rewrote."""
    assert docgen.stale_pages(ROOT) == []


def _copy_pages(tmp_path: Path) -> None:
    for rel in docgen.PAGES:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)


def test_a_planted_change_inside_a_block_is_stale_and_rewritten(tmp_path: Path) -> None:
    _copy_pages(tmp_path)
    page = tmp_path / "docs/guide/environment.md"
    text = page.read_text()
    planted = text.replace("| `EMU_WAIT` | `hybrid` |", "| `EMU_WAIT` | `spin` |")
    assert planted != text, "the row to plant into moved: update this test"
    page.write_text(planted)
    assert docgen.stale_pages(tmp_path) == ["docs/guide/environment.md"]
    assert docgen.main(["--check", "--root", str(tmp_path)]) == 1
    assert docgen.main(["--root", str(tmp_path)]) == 0
    assert page.read_text() == text
    assert docgen.stale_pages(tmp_path) == []


def test_a_missing_row_is_stale(tmp_path: Path) -> None:
    _copy_pages(tmp_path)
    page = tmp_path / "docs/guide/emurun.md"
    lines = page.read_text().splitlines(keepends=True)
    page.write_text("".join(line for line in lines if not line.startswith("| `--timeout`")))
    assert docgen.stale_pages(tmp_path) == ["docs/guide/emurun.md"]


def test_text_outside_the_blocks_is_kept() -> None:
    blocks = {name: f"<{name}>" for name in docgen.BLOCKS}
    page = (
        "intro\n"
        + docgen.BEGIN.format(name="env-nicd")
        + "\nold\n"
        + docgen.END.format(name="env-nicd")
        + "\noutro\n"
    )
    out = docgen.render_page(page, blocks, ("env-nicd",))
    assert out.startswith("intro\n")
    assert out.endswith("\noutro\n")
    assert "\n<env-nicd>\n" in out
    assert "old" not in out
    assert docgen.render_page(out, blocks) == out


@pytest.mark.parametrize(
    ("page", "message"),
    [
        ("<!-- end generated: env-nicd -->\n", "without its begin"),
        ("<!-- generated: env-nicd (python -m emubench.docgen) -->\n", "no end marker"),
        ("<!-- generated: nonsense (python -m emubench.docgen) -->\n", "unknown generated block"),
        ("no markers at all\n", "missing generated blocks: env-nicd"),
    ],
)
def test_broken_markers_are_errors(page: str, message: str) -> None:
    blocks = {name: "x" for name in docgen.BLOCKS}
    with pytest.raises(docgen.DocgenError, match=message):
        docgen.render_page(page, blocks, ("env-nicd",))


def test_every_page_holds_its_blocks() -> None:
    for rel, expected in docgen.PAGES.items():
        text = (ROOT / rel).read_text()
        for name in expected:
            assert docgen.BEGIN.format(name=name) in text, (rel, name)
            assert docgen.END.format(name=name) in text, (rel, name)


def test_every_variable_the_code_spells_is_described() -> None:
    names = {var.name for var in docgen.host_vars()}
    for package in docgen.SCANNED:
        for var in docgen.env_vars(package, frozenset(names)):
            assert var.meaning, var
            names.add(var.name)
    # the ones emurun, nicd and the agents set or read on purpose
    for name in ("EMU_RANK", "EMU_WAIT", "EMU_LOSS", "EMU_NICD_PROFILE", "EMU_FORKSERVER",
                 "EMU_TRACE_DIR", "EMUCLUSTER_MPI4PY"):  # fmt: skip
        assert name in names


def test_an_undescribed_variable_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "fakepkg"
    package.mkdir()
    (package / "__init__.py").write_text('ENV_A = "EMU_DOCUMENTED"  # what it does\n')
    (package / "use.py").write_text('import os\nos.environ.get("EMU_NOBODY_SAID")\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(docgen.DocgenError, match="EMU_NOBODY_SAID"):
        docgen.env_vars("fakepkg")
    monkeypatch.setitem(docgen.NOTES, "EMU_NOBODY_SAID", "now it is described")
    found = {var.name: var.meaning for var in docgen.env_vars("fakepkg")}
    assert found == {"EMU_DOCUMENTED": "what it does", "EMU_NOBODY_SAID": "now it is described"}


def test_the_options_table_lists_every_option() -> None:
    table = docgen.block_emurun_options()
    for action in build_parser()._actions:
        for option in action.option_strings:
            if option not in ("-h", "--help"):
                assert f"`{option}`" in table, option
