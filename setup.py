"""The build: the hot-path cores compiled with mypyc where a C compiler works, else pure Python.

One source: mypyc compiles the same typed modules (checked with ``mypy --strict``) into extension
modules installed beside the ``.py`` files, which stay the reference. ``pip install .`` compiles
`COMPILED`; it installs pure Python, saying so in one line, when no C compiler (or no Python
headers) can build an extension, when ``EMUCLUSTER_PURE=1`` asks for it, and for an editable
install (``pip install -e``: developers edit the ``.py`` files, which a compiled module beside
them would shadow). ``emurun --version`` says which build is installed
(`launcher.build.build_info`).

On Python < 3.12 it also builds `NATIVE`, the hand-written C extension that backports PEP 688's
buffer export (`emucluster.pep688`: ``memoryview(win)``), with the same fallback; an editable
install builds it too (it stands beside no ``.py`` file, so it shadows nothing developers edit).
Everything else about the package is in pyproject.toml.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import tempfile
from pathlib import Path

from setuptools import setup

# The modules mypyc compiles, by path. A module here is imported by native code: interpreted
# code may not subclass its classes or patch its functions (docs/dev/build.md).
COMPILED = [
    "nicd/config.py",
    "nicd/core/actions.py",
    "nicd/core/doorbell.py",
    "nicd/core/nic.py",
    "nicd/core/stats.py",
    "nicd/gm/ports.py",
    "nicd/gm/reassembly.py",
    "nicd/gm/service.py",
    "nicd/hostlink/codec.py",
    "nicd/hostlink/gm.py",
    "nicd/hostlink/grim.py",
    "nicd/hostlink/mcast.py",
    "nicd/hostlink/nicvm.py",
    "nicd/hostlink/records.py",
    "nicd/link/bundle.py",
    "nicd/link/channels.py",
    "nicd/link/congestion.py",
    "nicd/link/faults.py",
    "nicd/link/liveness.py",
    "nicd/link/rack.py",
    "nicd/link/recovery.py",
    "nicd/link/refusal.py",
    "nicd/link/reliable.py",
    "nicd/link/rto.py",
    "nicd/link/scoreboard.py",
    "nicd/link/selective.py",
    "nicd/link/sender.py",
    "nicd/link/wire.py",
    "nicd/shell/hostconn.py",
    "nicd/shell/shell.py",
    "emucluster/p2p/envelope.py",
    "emucluster/p2p/matching.py",
    "emucluster/p2p/ops.py",
    "emucluster/p2p/protocol.py",
    "emucluster/port/progress.py",
    "emucluster/port/state.py",
]

PURE_ENV = "EMUCLUSTER_PURE"

# The hand-written C extensions: module -> source. Only Python < 3.12 needs the PEP 688 backport.
NATIVE = {"emucluster.pep688._exporter": "emucluster/pep688/_exporter.c"}


def _say(line: str) -> None:
    print(f"emucluster build: {line}", file=sys.stderr, flush=True)


def _builds(editable: bool = False) -> bool:
    """Whether this run builds (a wheel or an install), not only metadata or an sdist (mypyc
    type-checks the whole package: it runs once, in the build), nor, unless ``editable``, an
    editable install (PEP 660 ``editable_wheel``, the legacy ``develop``: it runs the .py
    files developers edit)."""
    words = set(sys.argv[1:])
    if words & {"editable_wheel", "develop"}:
        return editable
    return bool(words & {"bdist_wheel", "build", "build_ext", "install"})


def _compiler_problem() -> str | None:
    """Why no extension module can be built here (None: a C compiler and Python's headers work).
    Compiles a file that includes Python.h with the compiler and flags the build would use."""
    from setuptools._distutils.ccompiler import new_compiler
    from setuptools._distutils.sysconfig import customize_compiler

    try:
        compiler = new_compiler()
        customize_compiler(compiler)
        command = " ".join(getattr(compiler, "compiler_so", ["cc"])[:1])
    except Exception as exc:  # no compiler known for this platform
        return f"{type(exc).__name__}: {exc}"
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp, "probe.c")
        source.write_text("#include <Python.h>\nint probe(void) { return 0; }\n")
        try:
            compiler.compile(
                [str(source)], output_dir=tmp, include_dirs=[sysconfig.get_paths()["include"]]
            )
        except Exception as exc:
            return f"{command} cannot compile a file that includes Python.h: {type(exc).__name__}"
    return None


def ext_modules() -> list[object]:
    """The compiled modules to build, or none (pure Python), saying why in one line."""
    native = sys.version_info < (3, 12)
    if not _builds(editable=native):
        return []
    if os.environ.get(PURE_ENV) == "1":
        _say(f"{PURE_ENV}=1: installing pure Python (no module compiled)")
        return []
    problem = _compiler_problem()
    if problem is not None:
        _say(f"no working C compiler ({problem}): installing pure Python (no module compiled)")
        return []
    natives = native_extensions() if native else []
    if not _builds():  # an editable install: the C extension only
        return natives
    return natives + mypyc_extensions()


def native_extensions() -> list[object]:
    """The hand-written C extensions (`NATIVE`)."""
    from setuptools import Extension

    _say(f"compiling the C extension{'s' * (len(NATIVE) > 1)} {', '.join(NATIVE)}")
    return [Extension(name, [source]) for name, source in NATIVE.items()]


def mypyc_extensions() -> list[object]:
    """The modules of `COMPILED`, compiled with mypyc (none if mypyc refuses, saying so)."""
    from mypyc.build import mypycify

    _say(f"compiling {len(COMPILED)} modules with mypyc ({PURE_ENV}=1 installs pure Python)")
    # one group per package: its shared library is a module of that package
    # (nicd/_compiled__mypyc.*.so), so it is found wherever the package is, an in-place build too
    groups = [
        ([path for path in COMPILED if path.startswith(f"{package}/")], f"{package}._compiled")
        for package in ("nicd", "emucluster")
    ]
    groups = [(paths, name) for paths, name in groups if paths]
    # mypy follows the compiled modules' imports into the rest of the package: a library
    # only those other modules use (numpy in nicd/grim) need not be in the build environment
    try:
        extensions = mypycify(
            ["--ignore-missing-imports", *COMPILED],
            opt_level="3",
            debug_level="0",
            separate=[(p, n) for p, n in groups],
        )
    except (SystemExit, Exception) as exc:  # a type error mypyc refuses: install, but say so
        _say(f"mypyc failed ({type(exc).__name__}: {exc}): installing the cores as pure Python "
             f"(no module compiled with mypyc)")  # fmt: skip
        return []
    return list(extensions)


modules = ext_modules()
# a build without mypyc stages in its own directory: a compiled build's extension files left in
# build/lib by an earlier install from this tree must not ride along
mypyc_built = any(getattr(module, "name", None) not in NATIVE for module in modules)
setup(ext_modules=modules, options={} if mypyc_built else {"build": {"build_base": "build/pure"}})
