"""docs/architecture.md's owners table matches the code: every ``care`` command is listed with the module
that defines it, every module and name the table gives exists, every folder of ``benchmarks/results/`` is
listed with the scripts that wrote its records."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import typer.main

import care
from care.cli import app

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
RESULTS = ROOT / "benchmarks" / "results"
HEADING = "## Who owns what: formats, commands, records"
#: ```care.x.y` (`name`, `name`)``: a module and, in brackets, names defined in it.
MODULE_NAMES = re.compile(r"`(care(?:\.\w+)+)`(?: \(([^)]*)\))?")
CODE = re.compile(r"`([^`]+)`")


def owner_rows() -> list[tuple[str, str, str, str]]:
    """``(kind, what, owner, through it)`` of every row of the owners table."""
    text = DOC.read_text(encoding="utf-8")
    assert HEADING in text, f"{DOC} lost its section {HEADING!r}"
    section = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and cells[0] in ("format", "command", "record"):
            rows.append((cells[0], cells[1], cells[2], cells[3]))
    return rows


def module_file(name: str) -> Path | None:
    """The file of module ``care.x.y`` under the package, or None."""
    base = Path(care.__file__).parent.joinpath(*name.split(".")[1:])
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def top_level_names(path: Path) -> set[str]:
    """Functions, classes and assigned names defined at the top of a module (imports not counted)."""
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def cli_commands(command, prefix: tuple[str, ...] = ()) -> dict[str, str]:
    """``{"care a b": module of its function}``: every command, and every group that runs without a subcommand."""
    out = {}
    if prefix and getattr(command, "callback", None) is not None:
        out["care " + " ".join(prefix)] = command.callback.__module__
    for name, sub in getattr(command, "commands", {}).items():
        out.update(cli_commands(sub, (*prefix, name)))
    return out


def record_script(command: str) -> str | None:
    """The file name of the benchmark script a record's command ran: ``python benchmarks/x.py ...`` or
    ``python -m benchmarks.x ...`` -> ``x.py``; None for any other command."""
    words = command.split()
    if "-m" in words[:-1] and (module := words[words.index("-m") + 1]).startswith("benchmarks."):
        return module.rpartition(".")[2] + ".py"
    return next((Path(w).name for w in words if w.endswith(".py")), None)


def test_every_module_and_name_in_the_table_exists():
    missing = []
    for kind, what, owner, through in owner_rows():
        for cell in (owner, through):
            for module, names in MODULE_NAMES.findall(cell):
                path = module_file(module)
                if path is None:
                    missing.append(f"{kind} {what}: no module {module}")
                    continue
                defined = top_level_names(path)
                missing += [f"{kind} {what}: {module} defines no {name}" for name in CODE.findall(names)
                            if name not in defined]
    assert missing == []


def test_every_command_is_listed_with_the_module_that_defines_it():
    listed = {CODE.findall(what)[0]: CODE.findall(owner)[0] for kind, what, owner, _ in owner_rows()
              if kind == "command"}
    assert listed == cli_commands(typer.main.get_command(app))


def test_a_record_command_names_its_script_run_either_way():
    assert record_script("python benchmarks/bench_care.py --seeds 0") == "bench_care.py"
    assert record_script("python -m benchmarks.bench_care --seeds 0") == "bench_care.py"
    assert record_script("care demo --fresh") is None


def test_every_results_folder_is_listed_with_the_scripts_that_wrote_its_records():
    listed = {CODE.findall(what)[0]: owner for kind, what, owner, _ in owner_rows() if kind == "record"}
    records = {f"benchmarks/results/{p.name}/" for p in RESULTS.iterdir() if p.is_dir()}
    records |= {f"benchmarks/results/{p.name}" for p in RESULTS.glob("*.json")}
    assert set(listed) == records
    problems = []
    for record, owner in listed.items():
        scripts = CODE.findall(owner)
        problems += [f"{record}: {s} does not exist" for s in scripts[:1] if not (ROOT / s).is_file()]
        named = {Path(s).name for s in scripts}
        path = ROOT / record
        for file in sorted(path.rglob("*.json") if path.is_dir() else [path]):
            command = json.loads(file.read_text(encoding="utf-8")).get("command", "")
            script = record_script(command)
            if script is not None and script not in named:
                problems.append(f"{file.relative_to(ROOT)} was written by {script}, not named for {record}")
    assert problems == []
