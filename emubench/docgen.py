"""The generated blocks of the docs: tables that restate code, rewritten from the code.

A page holds a generated block between two marker lines::

    <!-- generated: NAME (python -m emubench.docgen) -->
    ...
    <!-- end generated: NAME -->

``python -m emubench.docgen`` rewrites every block of every page in `PAGES` from the code;
``--check`` rewrites nothing, names the stale pages and exits 1 (the unit test
``tests/unit/emubench/test_docgen.py`` does the same). The blocks:

* ``emurun-options``: emurun's options, from ``launcher.cli.build_parser`` (one table per
  argument group, the help text as ``emurun --help`` prints it);
* ``env-host``: the host library's variables, from ``emucluster.config`` (the ``HostConfig``
  field docstrings, and the comments beside the ``ENV_*`` names emurun sets), then the other
  names emucluster's modules spell (``EMUCLUSTER_MPI4PY``);
* ``env-collectives``: one ``EMU_<OP>`` per collective operation, from the algorithm registry
  (``emucluster.coll``): its default and every registered algorithm;
* ``env-nicd``, ``env-launcher``, ``env-emutrace``: every other ``EMU_*`` / ``EMUCLUSTER_*``
  name a module of that package spells, with the docstring or comment beside it. A name the
  code spells without either is described in `NOTES`; a name described nowhere is an error.

Nothing here is measured or run: the modules are parsed (``ast``), and emurun's parser and
the algorithm registry are built as ``emurun --help`` builds them.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib.util
import inspect
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from emucluster import coll
from emucluster import config as host_config
from launcher import cli

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

__all__ = [
    "BLOCKS",
    "NOTES",
    "PAGES",
    "DocgenError",
    "EnvVar",
    "env_vars",
    "main",
    "render_page",
    "stale_pages",
]

ENV_NAME = re.compile(r"(EMU|EMUCLUSTER)_[A-Z0-9_]*[A-Z0-9]")
"""What an environment variable of the project looks like (``EMU_`` alone is a prefix)."""
BEGIN = "<!-- generated: {name} (python -m emubench.docgen) -->"
END = "<!-- end generated: {name} -->"
_BEGIN_RE = re.compile(r"^<!-- generated: ([a-z0-9-]+) \(python -m emubench\.docgen\) -->$")
_END_RE = re.compile(r"^<!-- end generated: ([a-z0-9-]+) -->$")
SCANNED = ("nicd", "emucluster", "launcher", "emutrace")
"""The packages whose environment variables the guide lists (emubench's are its own)."""

NOTES: dict[str, str] = {
    "EMU_FORKSERVER_DEBUG": "set (to anything) in emurun's environment: the fork server names "
    "on stderr the modules it had not preloaded (a developer's check of its start-up).",
    "EMU_TOKEN_FILE": "removed from the environment an agent gives the processes it starts, "
    "so a token path kept in the agent's environment never reaches user programs.",
    "EMU_LIFELINE": "set by emurun and the agents for every process they start: "
    "``<fd>:<dev>:<inode>`` of the read end of a pipe the launcher holds; the process stops "
    "itself when the pipe closes (its launcher died).",
    "EMU_TRACE_DIR": "set by ``emurun --trace DIR`` for every nicd and host (across hosts, each "
    "agent points its processes at its own run directory): each process records its events and "
    "writes one ``*.trace.msgpack`` there at exit.",
}
"""Descriptions of the names the code spells without a docstring or comment beside them."""


class DocgenError(Exception):
    """A page's markers are broken (missing, unbalanced, unknown name), or a variable the
    code spells is described nowhere. Fix the page or add the description (in the code, or
    in `NOTES`), then run ``python -m emubench.docgen``."""


@dataclass(frozen=True, slots=True)
class EnvVar:
    """One environment variable as the code declares it."""

    name: str
    """``EMU_WAIT``."""
    module: str
    """The file that declares it, relative to the project root (``emucluster/config.py``)."""
    meaning: str
    """Its docstring or comment, one line of Markdown."""
    default: str = ""
    """Its default as the environment would spell it ("" when it has none)."""


# -- parsing the code -------------------------------------------------------------------------


def _package_root(package: str) -> Path:
    """The directory holding ``package`` (the project root, in a checkout)."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise DocgenError(f"cannot find the package {package}")
    return Path(spec.origin).resolve().parents[1]


def _markdown(text: str) -> str:
    """A docstring or comment as one table cell: reST literals as code, one line, no pipes."""
    text = " ".join(text.split())
    text = text.replace("``", "`")
    text = re.sub(r":(?:class|func|meth|mod|data|attr):`~?([^`]+)`", r"`\1`", text)
    return text.replace("|", "\\|")


def _strip_name(name: str, text: str) -> str:
    """``"``EMU_WAIT``: how ..."`` -> ``"how ..."`` (the table already names it)."""
    match = re.match(r"``" + re.escape(name) + r"``\s*[:,]?\s*", text)
    return text[match.end() :] if match else text


def _comment_after(lines: Sequence[str], node: ast.stmt) -> str:
    """The ``# comment`` on the line where ``node`` ends, if any."""
    line = lines[(node.end_lineno or node.lineno) - 1]
    rest = line[node.end_col_offset or 0 :]
    match = re.match(r"\s*#\s*(.*)$", rest)
    return match.group(1).strip() if match else ""


def _docstring_after(body: Sequence[ast.stmt], index: int) -> str:
    """The string statement right after ``body[index]`` (an attribute docstring), if any."""
    if index + 1 < len(body):
        nxt = body[index + 1]
        if (
            isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            return inspect.cleandoc(nxt.value.value)
    return ""


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def _declared(path: Path, rel: str) -> Iterator[EnvVar]:
    """Every variable one module spells: module-level constants with their docstring or
    comment, the values of a module-level mapping (nicd's ``FAULT_ENV``: flag -> variable),
    and bare literals anywhere else (described by `NOTES`)."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    lines = source.splitlines()
    described: set[int] = set()
    for index, node in enumerate(tree.body):
        if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
            continue
        value = node.value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            if ENV_NAME.fullmatch(value.value):
                described.add(id(value))
                meaning = _docstring_after(tree.body, index) or _comment_after(lines, node)
                yield EnvVar(value.value, rel, _markdown(meaning or NOTES.get(value.value, "")))
            continue
        for sub in ast.walk(value):
            if not isinstance(sub, ast.Dict):
                continue
            for key, item in zip(sub.keys, sub.values, strict=True):
                if (
                    isinstance(key, ast.Constant)
                    and isinstance(key.value, str)
                    and isinstance(item, ast.Constant)
                    and isinstance(item.value, str)
                    and ENV_NAME.fullmatch(item.value)
                ):
                    described.add(id(item))
                    meaning = f"default of the `{_flag(key.value)}` flag (nicd and emurun)"
                    yield EnvVar(item.value, rel, meaning)
    for sub in ast.walk(tree):
        if (
            isinstance(sub, ast.Constant)
            and isinstance(sub.value, str)
            and id(sub) not in described
            and ENV_NAME.fullmatch(sub.value)
        ):
            yield EnvVar(sub.value, rel, _markdown(NOTES.get(sub.value, "")))


def env_vars(package: str, known: frozenset[str] = frozenset()) -> list[EnvVar]:
    """Every variable ``package``'s modules spell but ``known``, once each (the described
    declaration wins), in name order. `DocgenError` if one is described nowhere."""
    root = _package_root(package)
    found: dict[str, EnvVar] = {}
    for path in sorted((root / package).rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for var in _declared(path, rel):
            if var.name in known:
                continue
            have = found.get(var.name)
            if have is None or (not have.meaning and var.meaning):
                found[var.name] = var
    missing = sorted(name for name, var in found.items() if not var.meaning)
    if missing:
        raise DocgenError(f"{package}: no description for {', '.join(missing)}")
    return [found[name] for name in sorted(found)]


def _env_default(value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "1" if value else "0"
    if value == "":
        return "empty"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def host_vars() -> list[EnvVar]:
    """The host library's variables: ``HostConfig``'s fields (by their docstrings, which
    start with the variable's name) and the ``ENV_*`` names it does not hold (a host's place
    in the job, which emurun sets), in the order ``emucluster/config.py`` declares them."""
    config_class = host_config.HostConfig
    path = Path(inspect.getfile(host_config))
    rel = path.relative_to(_package_root("emucluster")).as_posix()
    defaults = {
        f.name: f.default
        for f in dataclasses.fields(config_class)
        if f.default is not dataclasses.MISSING
    }
    out: dict[str, EnvVar] = {var.name: var for var in _declared(path, rel)}
    cls = next(
        node
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, ast.ClassDef) and node.name == config_class.__name__
    )
    for index, node in enumerate(cls.body):
        if not isinstance(node, ast.AnnAssign) or not isinstance(node.target, ast.Name):
            continue
        doc = _docstring_after(cls.body, index)
        match = re.match(r"``((?:EMU|EMUCLUSTER)_[A-Z0-9_]+)``", doc)
        if match is None:
            continue  # not one variable (``algorithms``: the EMU_<OP> table)
        name = match.group(1)
        default = _env_default(defaults.get(node.target.id))
        out[name] = EnvVar(name, rel, _markdown(_strip_name(name, doc)), default)
    missing = sorted(name for name, var in out.items() if not var.meaning)
    if missing:
        raise DocgenError(f"emucluster.config: no description for {', '.join(missing)}")
    return list(out.values())


# -- the blocks -------------------------------------------------------------------------------


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _link(rel: str, depth: int = 2) -> str:
    """A link to a source file from a page ``depth`` folders below the root."""
    return f"[`{rel}`]({'../' * depth}{rel})"


def block_env_host() -> str:
    """The host library's variables: ``HostConfig``'s, then the rest of emucluster's."""
    config = host_vars()
    rest = env_vars("emucluster", frozenset(v.name for v in config))
    rows = [
        (f"`{v.name}`", f"`{v.default}`" if v.default else "", v.meaning, _link(v.module))
        for v in (*config, *rest)
    ]
    return _table(("variable", "default", "meaning", "declared in"), rows)


def block_env_collectives() -> str:
    """One ``EMU_<OP>`` per collective operation: its default and its algorithms."""
    rows = []
    for operation in coll.OPERATIONS:
        names = ", ".join(f"`{name}`" for name in coll.choices(operation))
        rows.append(
            (
                f"`{coll.env_var(operation)}`",
                f"`{coll.DEFAULTS[operation]}`",
                f"`{coll.BASELINES[operation]}`",
                names,
            )
        )
    return _table(("variable", "default", "MPICH's (baseline)", "algorithms"), rows)


def _block_env_package(package: str) -> Callable[[], str]:
    def render() -> str:
        rows = [(f"`{v.name}`", v.meaning, _link(v.module)) for v in env_vars(package)]
        return _table(("variable", "meaning", "declared in"), rows)

    render.__doc__ = f"The variables {package}'s modules spell."
    return render


def _option_cell(action: argparse.Action) -> str:
    names = ", ".join(f"`{name}`" for name in action.option_strings)
    if action.nargs == 0:
        return names
    if action.choices is not None:
        arg = "\\|".join(str(choice) for choice in action.choices)
    else:
        metavar = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
        arg = metavar
    return f"{names} `{arg}`"


def block_emurun_options() -> str:
    """emurun's options, one table per argument group of ``launcher.cli.build_parser``."""
    parser: argparse.ArgumentParser = cli.build_parser()
    formatter = parser._get_formatter()
    parts: list[str] = []
    for group in parser._action_groups:
        rows = []
        for action in group._group_actions:
            if isinstance(action, argparse._HelpAction) or not action.option_strings:
                continue
            default = action.default
            shown = "" if default in (None, False, [], "", argparse.SUPPRESS) else f"`{default}`"
            text = formatter._expand_help(action) if action.help else ""
            rows.append((_option_cell(action), shown, _markdown(text)))
        if not rows:
            continue
        title = group.title or ""
        title = "general options" if title in ("options", "optional arguments") else title
        parts.append(
            f"**{title[0].upper()}{title[1:]}**\n\n"
            + _table(("option", "default", "meaning"), rows)
        )
    return "\n\n".join(parts)


BLOCKS: dict[str, Callable[[], str]] = {
    "emurun-options": block_emurun_options,
    "env-host": block_env_host,
    "env-collectives": block_env_collectives,
    "env-nicd": _block_env_package("nicd"),
    "env-launcher": _block_env_package("launcher"),
    "env-emutrace": _block_env_package("emutrace"),
}
"""Block name -> its renderer (Markdown, no trailing newline)."""

PAGES: dict[str, tuple[str, ...]] = {
    "docs/guide/emurun.md": ("emurun-options",),
    "docs/guide/environment.md": (
        "env-host",
        "env-collectives",
        "env-nicd",
        "env-launcher",
        "env-emutrace",
    ),
}
"""Page (relative to the project root) -> the blocks it must hold, each once."""


# -- pages ------------------------------------------------------------------------------------


def render_page(text: str, blocks: dict[str, str], expected: Sequence[str] = ()) -> str:
    """``text`` with every generated block's body replaced by ``blocks[name]``.

    `DocgenError` for an unknown block, a begin without its end (or the reverse), a block
    twice, or a block of ``expected`` that the page does not hold."""
    out: list[str] = []
    seen: list[str] = []
    inside: str | None = None
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        stripped = line.strip()
        begin, end = _BEGIN_RE.match(stripped), _END_RE.match(stripped)
        if inside is None:
            if end:
                raise DocgenError(f"line {number}: end of {end.group(1)} without its begin")
            out.append(line)
            if begin:
                name = begin.group(1)
                if name not in blocks:
                    raise DocgenError(f"line {number}: unknown generated block {name!r}")
                if name in seen:
                    raise DocgenError(f"line {number}: block {name} twice")
                seen.append(name)
                inside = name
                out.append("\n" + blocks[name] + "\n\n")
        elif end:
            if end.group(1) != inside:
                raise DocgenError(f"line {number}: end of {end.group(1)} inside {inside}")
            inside = None
            out.append(line)
        elif begin:
            raise DocgenError(f"line {number}: block {begin.group(1)} inside {inside}")
    if inside is not None:
        raise DocgenError(f"block {inside} has no end marker")
    missing = [name for name in expected if name not in seen]
    if missing:
        raise DocgenError(f"missing generated blocks: {', '.join(missing)}")
    return "".join(out)


def _rendered() -> dict[str, str]:
    return {name: render() for name, render in BLOCKS.items()}


def stale_pages(root: Path) -> list[str]:
    """The pages of `PAGES` under ``root`` whose generated blocks differ from the code."""
    blocks = _rendered()
    stale = []
    for rel, expected in PAGES.items():
        text = (root / rel).read_text(encoding="utf-8")
        if render_page(text, blocks, expected) != text:
            stale.append(rel)
    return stale


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m emubench.docgen [--check] [--root DIR]``."""
    parser = argparse.ArgumentParser(
        prog="python -m emubench.docgen",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--check", action="store_true", help="exit 1 if a page is stale")
    parser.add_argument("--root", type=Path, default=Path(), help="the project root (.)")
    args = parser.parse_args(argv)
    root: Path = args.root
    try:
        if args.check:
            stale = stale_pages(root)
            for rel in stale:
                print(f"stale: {rel} (run python -m emubench.docgen)", file=sys.stderr)
            return 1 if stale else 0
        blocks = _rendered()
        for rel, expected in PAGES.items():
            path = root / rel
            text = path.read_text(encoding="utf-8")
            new = render_page(text, blocks, expected)
            if new != text:
                path.write_text(new, encoding="utf-8")
                print(f"rewrote {rel}")
    except DocgenError as exc:
        print(f"docgen: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
