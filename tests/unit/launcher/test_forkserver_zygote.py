"""The zygote's preload: the modules it imports, read from source (forkserver/zygote.py)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from launcher.forkserver.zygote import _module_imports

if TYPE_CHECKING:
    from pathlib import Path

    import pytest


def test_module_imports_reads_the_source_without_running_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "zyg_probe.py").write_text(
        "raise SystemExit('never executed')\n"
        "import json, os.path\n"
        "from collections import abc\n"
        "from . import sibling\n"
        "if TYPE_CHECKING:\n"
        "    import typing_only\n"
        "try:\n"
        "    import optional_mod\n"
        "except ImportError:\n"
        "    pass\n"
        "def later():\n"
        "    import nested_only\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    top = _module_imports("zyg_probe", nested=False)
    assert top == ["json", "os.path", "collections", "collections.abc", "optional_mod"]
    assert _module_imports("zyg_probe", nested=True) == [*top, "nested_only"]
    assert "zyg_probe" not in sys.modules
