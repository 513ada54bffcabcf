"""The ``care`` command: a thin typer front over the Python API.

Each area (bench, train, curate, ...) owns a ``cli`` module exposing ``register(app)``; this file
only wires them together so that ``care --help`` stays fast (heavy imports happen inside commands).
"""

from __future__ import annotations

import importlib
import logging
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

import typer

from care.data.errors import DataFormatError
from care.errors import CareError

#: What the user can fix: printed as one line, exit status 2 (not a traceback).
USER_ERRORS: tuple[type[BaseException], ...] = (CareError, DataFormatError, FileNotFoundError)
#: Exit status of a user error (:data:`USER_ERRORS`) and of anything else a command raised.
USER_ERROR_EXIT, UNEXPECTED_ERROR_EXIT = 2, 1


@dataclass
class CliState:
    """The global options of this invocation, read when a command's error is printed."""

    verbose: bool = False


STATE = CliState()

app = typer.Typer(
    name="care",
    help="CMedTEB benchmark harness and the CARE asymmetric retriever for Chinese medical retrieval.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

#: Modules whose ``register(app)`` adds commands; one line per area.
COMMAND_MODULES: tuple[str, ...] = (
    "care.curate.cli",
    "care.bench.cli",
    "care.encoders.cli",
    "care.models.cli",
    "care.train.cli",
    "care.pretrain.cli",
    "care.index.cli",
    "care.serve.cli",
    "care.doctor.cli",
    "care.pipeline.cli",
)


@app.callback()
def _root(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Debug logging, and the traceback of an error."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Warnings and errors only."),
) -> None:
    STATE.verbose = verbose
    level = logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")


def _demo_task_folders() -> list[Path]:
    """The embedded demo benchmark's task folders (``care bench`` without ``--task``)."""
    from care.demo import demo_task_folders

    return demo_task_folders()


#: Keyword arguments of an area's ``register`` (this file composes the areas; they do not import each other).
REGISTER_OPTIONS: dict[str, dict[str, object]] = {"care.bench.cli": {"default_tasks": _demo_task_folders}}

for _module in COMMAND_MODULES:
    importlib.import_module(_module).register(app, **REGISTER_OPTIONS.get(_module, {}))


def run_cli(typer_app: typer.Typer) -> None:
    """Run a typer app; an error is one line on stderr, with its traceback above it only with ``--verbose``.

    User errors (:data:`USER_ERRORS`) print ``error: ...`` and exit with :data:`USER_ERROR_EXIT`; anything
    else prints ``error: unexpected TYPE: ...`` and how to see the traceback, and exits with
    :data:`UNEXPECTED_ERROR_EXIT`.
    """
    try:
        typer_app()
    except USER_ERRORS as exc:
        if STATE.verbose:
            traceback.print_exc()
        sys.stderr.write(f"error: {exc}\n")
        sys.exit(USER_ERROR_EXIT)
    except Exception as exc:
        if STATE.verbose:
            traceback.print_exc()
        message = " ".join(f"{type(exc).__name__}: {exc}".split())
        hint = "the traceback is above" if STATE.verbose else "rerun with care --verbose ... to see the traceback"
        sys.stderr.write(f"error: unexpected {message} ({hint})\n")
        sys.exit(UNEXPECTED_ERROR_EXIT)


def main() -> None:
    """Console-script entry point; user errors become one clear line and exit code 2."""
    run_cli(app)


if __name__ == "__main__":
    main()
