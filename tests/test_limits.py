"""The house's limits as tests: the README a page, benchmark drivers pages over the library, package modules rooms
a reader can hold, and the lint gate (ruff, the rules in pyproject.toml) — so the README's one test command checks
them all.

A file over its limit fails here unless :data:`EXCEPTIONS` names it with the reason; an exception that is no longer
needed fails too, so the list only shrinks.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Lines of README.md: a front page, the detail in docs/.
README_LINES = 150
#: Lines of a benchmark driver (``benchmarks/*.py``): a page over the package, its logic in ``care``.
DRIVER_LINES = 150
#: Lines of a package module (``src/care/**/*.py``): one concept per module.
MODULE_LINES = 600
#: What ruff checks (as .ci/run and the README's test command do).
LINTED = ("src", "tests", "benchmarks", "scripts")
#: Seconds ruff may take on the whole tree (it takes about one).
RUFF_TIMEOUT_S = 120

#: Files allowed over their limit, each with the reason; relative to the repository root.
EXCEPTIONS: dict[str, str] = {}


def limited_files() -> dict[str, int]:
    """``{path relative to the root: its line limit}`` of every file a limit covers."""
    files = {"README.md": README_LINES}
    files.update({p.relative_to(ROOT).as_posix(): DRIVER_LINES for p in sorted((ROOT / "benchmarks").glob("*.py"))})
    files.update({p.relative_to(ROOT).as_posix(): MODULE_LINES for p in sorted((ROOT / "src" / "care").rglob("*.py"))})
    return files


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def over_limit() -> dict[str, tuple[int, int]]:
    """``{file: (lines, limit)}`` of every limited file longer than its limit."""
    counts = {name: (line_count(ROOT / name), limit) for name, limit in limited_files().items()}
    return {name: (lines, limit) for name, (lines, limit) in counts.items() if lines > limit}


def test_the_limits_cover_the_files():
    files = limited_files()
    assert files["README.md"] == README_LINES and "src/care/cli.py" in files  # a broken glob would check nothing
    assert sum(limit == DRIVER_LINES for limit in files.values()) > 10
    assert all(reason.strip() for reason in EXCEPTIONS.values())


def test_no_file_passes_its_limit_unless_listed_with_a_reason():
    unlisted = {name: f"{lines} lines (limit {limit})" for name, (lines, limit) in over_limit().items()
                if name not in EXCEPTIONS}
    assert not unlisted, ("over the limit — move detail into docs/ (README), logic into the package (a driver), or "
                          f"a concept into its own module (a module): {unlisted}")


def test_every_exception_is_still_needed():
    stale = sorted(set(EXCEPTIONS) - set(over_limit()))
    assert not stale, f"within its limit (or gone) now: remove it from EXCEPTIONS in {Path(__file__).name}: {stale}"


def ruff_command() -> list[str] | None:
    """How to run ruff here: the one beside this Python, on PATH, or the ``ruff`` package's binary; None: none."""
    for found in (shutil.which("ruff", path=str(Path(sys.executable).parent)), shutil.which("ruff")):
        if found:
            return [found]
    try:
        import ruff  # the PyPI package ships the binary
    except ImportError:
        return None
    return [ruff.find_ruff_bin()]


def test_ruff_passes():
    command = ruff_command()
    if command is None:
        pytest.skip("ruff is not installed (pip install 'care-retrieval[dev]', or ruff alone) — the lint gate did not run")
    done = subprocess.run([*command, "check", *LINTED], cwd=ROOT, capture_output=True, text=True,
                          timeout=RUFF_TIMEOUT_S)
    assert done.returncode == 0, f"ruff check {' '.join(LINTED)}:\n{done.stdout}{done.stderr}"


def imports_benchmarks(path: Path) -> bool:
    """Whether the test file ``path`` imports ``benchmarks`` or a module of it (lazy imports included)."""
    import ast

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        if any(name == "benchmarks" or name.startswith("benchmarks.") for name in names):
            return True
    return False


def test_tests_import_only_the_package():
    found = [p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "tests").rglob("*.py")) if imports_benchmarks(p)]
    assert not found, f"tests import benchmarks.*: import the logic from care.* instead (a driver is a page over it): {found}"
