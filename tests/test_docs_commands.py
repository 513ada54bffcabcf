"""Every ``care ...`` command line in README.md and docs/ parses with the CLI as it is.

A command a user copies from the docs must not fail on its syntax: an unknown subcommand, an option the
command does not have, or an argument it does not take (``care bench openai:...`` once stood in
docs/serve.md, where ``care bench`` takes ``--model``). Commands are read from shell code blocks and from
inline code spans that start with ``care``; what follows a placeholder (``...``, ``[-o DIR]``, ``<dev set>``,
``COMMAND``, ``a / b`` alternatives) is not checked. Values are not converted or checked (the paths are
examples); only the syntax is.
"""

from __future__ import annotations

import functools
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer.core
import typer.main

from care.cli import app

ROOT = Path(__file__).resolve().parents[1]
#: The lab notes record commands as they were run at their date; the rest of the docs are current.
DOC_FILES = [ROOT / "README.md", *sorted(p for p in (ROOT / "docs").glob("*.md") if p.name != "lab-notes.md")]
#: Code blocks in these languages hold no shell commands.
NOT_SHELL = {"python", "py", "yaml", "yml", "json", "text", "toml"}
CARE_LINE = re.compile(r"^(?:\S*/)?care (.*)$")
INLINE_CARE = re.compile(r"`((?:\S*/)?care [^`]+)`")
SHELL_SEPARATORS = re.compile(r"&&|\|\||;|\s\|\s|\s&$")
#: Tokens that stand for something the reader fills in, or prose inside a diagram.
PLACEHOLDER = re.compile(r"^(\.\.\.|/|\(.*|\[.*|.*\]|<.*|.*>|[A-Z][A-Z_]+|[^\x00-\x7f].*)$")


@dataclass(frozen=True)
class DocCommand:
    """One ``care`` invocation found in a doc: where, its arguments after ``care``, and whether it is an inline
    mention (prose may name an option without its value: ```care serve --onnx```)."""

    where: str
    args: tuple[str, ...]
    inline: bool = False


def doc_commands(path: Path) -> list[DocCommand]:
    """The ``care`` command lines of one markdown file (shell blocks, with ``\\`` continuations, and inline spans)."""
    found: list[DocCommand] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    language: str | None = None  # the open code block's language; None outside a block
    i = 0
    while i < len(lines):
        line, number = lines[i], i + 1
        if line.lstrip().startswith("```"):
            language = None if language is not None else line.strip().strip("`").strip().lower()
        elif language is not None:
            while line.endswith("\\") and i + 1 < len(lines):
                i += 1
                line = line[:-1] + " " + lines[i].strip()
            if language not in NOT_SHELL:
                for part in SHELL_SEPARATORS.split(line.split(" #", 1)[0]):
                    if match := CARE_LINE.match(part.strip()):
                        found.append(DocCommand(f"{path.name}:{number}", tuple(shlex.split(match.group(1)))))
        else:
            for span in INLINE_CARE.findall(line):
                args = tuple(shlex.split(span.split("care ", 1)[1]))
                found.append(DocCommand(f"{path.name}:{number}", args, inline=True))
        i += 1
    return found


def checkable(args: tuple[str, ...]) -> list[str]:
    """``args`` up to the first placeholder; an option left without its value at the cut is dropped too."""
    kept: list[str] = []
    for arg in args:
        if PLACEHOLDER.match(arg):
            if kept and kept[-1].startswith("-") and "=" not in kept[-1]:
                kept.pop()
            break
        kept.append(arg)
    return kept


@functools.cache
def care_command():
    """The ``care`` command as click sees it (built once: typer builds it anew on every call)."""
    return typer.main.get_command(app)


def parse_problem(args: list[str]) -> str | None:
    """Why ``care ARGS`` would fail to parse, or None. Only the option parser runs (values are not converted,
    required options not checked); a group parses its own options and hands the rest to its subcommand."""
    command, name = care_command(), "care"
    while True:
        context = command.context_class(command, info_name=name)
        try:
            _, rest, _ = command.make_parser(context).parse_args(args=list(args))
        except typer.core._click.exceptions.UsageError as exc:  # typer vendors click; this is its UsageError
            return f"{name}: {exc}"
        if not hasattr(command, "commands"):
            return f"{name}: takes no argument(s) {rest}" if rest else None
        if not rest:
            return None
        if rest[0] not in command.commands:
            return f"{name}: no subcommand {rest[0]!r} (it has {', '.join(sorted(command.commands))})"
        name, command, args = f"{name} {rest[0]}", command.commands[rest[0]], rest[1:]


COMMANDS = [command for path in DOC_FILES for command in doc_commands(path)]


def test_the_docs_hold_commands_to_check():
    assert len(COMMANDS) > 100  # the reader found the command lines (a broken reader would check nothing)


@pytest.mark.parametrize("command", COMMANDS, ids=[c.where for c in COMMANDS])
def test_doc_command_parses(command: DocCommand):
    args = checkable(command.args)
    problem = parse_problem(args)
    if problem and command.inline and "requires an argument" in problem:
        problem = parse_problem([*args, "VALUE"])  # prose naming an option: the option exists and takes a value
    assert problem is None, f"{command.where}: `care {shlex.join(command.args)}`: {problem}"


def test_a_wrong_command_is_caught():
    assert parse_problem(["bench", "openai:care"]) is not None  # a positional the command does not take
    assert parse_problem(["bench", "--no-such-option"]) is not None
    assert parse_problem(["trian", "recipe"]) is not None
    assert parse_problem(["bench", "--model", "e5", "--task", "x"]) is None
    assert parse_problem(["train", "--config", "stage2.yaml", "--resume"]) is None


def test_placeholders_end_what_is_checked():
    assert checkable(("index", "build", "...", "--shard", "0/4")) == ["index", "build"]
    assert checkable(("model", "shrink-e5", "-o", "x.bin", "--vocab-from", "<dev", "set>/corpus.jsonl")) == [
        "model", "shrink-e5", "-o", "x.bin"]
    assert checkable(("curate", "anonymise", "/", "diversify")) == ["curate", "anonymise"]
    assert checkable(("run", "CONFIG.yaml", "[-o", "RUN_DIR]")) == ["run", "CONFIG.yaml"]
