"""One schema for every benchmark result: what ran, on which code and machine, and what it measured.

Every script under ``benchmarks/`` writes its figures through :func:`write_record` to
``benchmarks/results/<experiment>/<name>.json``, so a reader (and the README / docs table generators)
can always tell which command, commit, configuration and seeds produced a number, and how loaded the
shared machine was when a latency was taken. :func:`read_records` reads an experiment back. A long run calls
:func:`pin_commit` at its start, so its records name the code that ran, not a commit made while it trained; a tree
with uncommitted changes to tracked files is refused there unless the run allows it (``--allow-dirty``), and then
the record keeps the SHA-256 of ``git diff HEAD`` (``extra.diff_sha256``, :data:`DIFF_HASH_KEY`) beside
``<sha>+dirty``. Nothing writes a commit by hand: a record that arrives with a commit other than the checkout's is
refused (:func:`write_record`).

Schema (:data:`RECORD_SCHEMA_VERSION`)::

    {"schema": 1, "experiment": ..., "name": ..., "command": "python -m benchmarks.x --seed 0",
     "commit": "<git sha>[+dirty]", "date": "2026-11-25T18:00:00+0000",
     "machine": {"cpu": ..., "cores": 2, "gpu": null, "load_average_1min": 1.3, "python": ..., "torch": ...},
     "config": {...}, "seeds": [0, 1, 2], "scores": {...}, "latencies": {...}, "extra": {...}}
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from care.data.io import write_json
from care.errors import CareError
from care.hashes import hex_digest

RECORD_SCHEMA_VERSION = 1
#: Fields every record must hold (checked on write and on read).
REQUIRED_FIELDS: tuple[str, ...] = ("schema", "experiment", "name", "command", "commit", "date", "machine",
                                    "config", "seeds", "scores", "latencies")


#: Names the commit of a copy of the tree that travelled without ``.git`` (a GPU machine, a container).
COMMIT_ENV = "CARE_GIT_COMMIT"
#: Environment variables naming data folders that sit elsewhere on every machine (the private dev set the
#: benchmarks and ``configs/runs`` read, the CMedTEB data root): a path under one is recorded as ``$NAME/...``.
DATA_FOLDER_VARIABLES: tuple[str, ...] = ("CARE_DEV_SET", "CMEDTEB_DATA")
#: Where a record (``extra``) or a run's manifest keeps the SHA-256 of the uncommitted diff it ran with.
DIFF_HASH_KEY = "diff_sha256"
#: The flag that lets a run start from a tree with uncommitted changes (the diff's hash is then recorded).
ALLOW_DIRTY_FLAG = "--allow-dirty"


@dataclass(frozen=True)
class CodeState:
    """The code a run starts on.

    Attributes:
        commit: ``<sha>``, ``<sha>+dirty``, ``$CARE_GIT_COMMIT`` outside a checkout, or ``"unknown"``.
        diff_sha256: SHA-256 of ``git diff HEAD`` (tracked files) when the tree is dirty, else ``None``.
    """

    commit: str
    diff_sha256: str | None = None

    @property
    def dirty(self) -> bool:
        return self.diff_sha256 is not None

    def to_dict(self) -> dict[str, Any]:
        return {"commit": self.commit, DIFF_HASH_KEY: self.diff_sha256}


#: Code states pinned by :func:`pin_commit`, by resolved results root.
_PINNED: dict[Path, CodeState] = {}


def git_commit(root: str | Path | None = None) -> str:
    """The checked-out commit of the repository at ``root`` (default: this file's), ``+dirty`` when
    tracked files differ from it. Outside a git checkout: the value of ``$CARE_GIT_COMMIT`` (set by whoever
    copied the tree there, e.g. ``benchmarks/real_weights_gpu.sh``), else ``"unknown"``."""
    cwd = _checkout_dir(root)
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return os.environ.get(COMMIT_ENV) or "unknown"
    return f"{sha}+dirty" if dirty else sha


def _checkout_dir(root: str | Path | None) -> Path:
    cwd = Path(root).resolve() if root is not None else Path(__file__).resolve().parent
    while not cwd.is_dir() and cwd != cwd.parent:  # a results folder not created yet: ask its parent
        cwd = cwd.parent
    return cwd


def code_state(root: str | Path | None = None) -> CodeState:
    """:func:`git_commit` of the checkout at ``root`` and, when it is dirty, the SHA-256 of ``git diff HEAD``."""
    commit = git_commit(root)
    if not commit.endswith("+dirty"):
        return CodeState(commit)
    diff = subprocess.run(["git", "diff", "HEAD"], cwd=_checkout_dir(root), capture_output=True, check=True).stdout
    return CodeState(commit, hex_digest(diff))


def require_clean(state: CodeState, *, allow_dirty: bool, where: str) -> CodeState:
    """``state``, unless its tree is dirty and ``allow_dirty`` is off.

    Raises:
        CareError: uncommitted changes to tracked files, without ``allow_dirty``.
    """
    if state.dirty and not allow_dirty:
        raise CareError(f"{where}: the checkout has uncommitted changes to tracked files ({state.commit}), so what it "
                        f"records would name code that no commit holds; commit them first, or pass "
                        f"{ALLOW_DIRTY_FLAG} to run anyway (the diff's SHA-256 is then recorded)")
    return state


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict[str, Any]:
    """CPU model, core count, GPU (if torch sees one), 1-minute load average and library versions."""
    info: dict[str, Any] = {"cpu": _cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
                            "load_average_1min": round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
                            "gpu": None}
    torch = sys.modules.get("torch")
    if torch is not None:
        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    return info


def portable_path(text: str, root: str | Path | None = None) -> str:
    """``text`` as a record should show it: a path under a folder of :data:`DATA_FOLDER_VARIABLES` as
    ``$NAME/...``, a path under ``root`` (default: the working directory) relative to it (``.`` for ``root``
    itself); any other text unchanged."""
    bases = [(f"${name}", Path(os.environ[name].strip()).expanduser()) for name in DATA_FOLDER_VARIABLES
             if os.environ.get(name, "").strip()]
    bases.append(("", Path(root) if root is not None else Path.cwd()))
    for shown, base in bases:
        for prefix in dict.fromkeys((str(base).rstrip("/"), str(base.resolve()).rstrip("/"))):
            if prefix and text == prefix:
                return shown or "."
            if prefix and text.startswith(prefix + "/"):
                rest = text[len(prefix) + 1:]
                return f"{shown}/{rest}" if shown else rest
    return text


def _shell_word(arg: str) -> str:
    """``arg`` quoted for a shell, a leading ``$NAME`` (from :func:`portable_path`) left for the shell to expand."""
    for name in DATA_FOLDER_VARIABLES:
        if arg == f"${name}" or arg.startswith(f"${name}/"):
            rest = arg[len(name) + 1:]
            return f"${name}" + (shlex.quote(rest) if rest else "")
    return shlex.quote(arg)


def invocation() -> str:
    """This process's command line, as a shell would take it: ``python -m benchmarks.x --a b`` for a module run
    with ``-m``, ``python benchmarks/x.py --a b`` for a script; arguments under a data folder's variable or the
    working directory shown by :func:`portable_path`, so the command names no machine's folders."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name:  # run with -m (a package's __main__ runs as the package)
        head = ["python", "-m", spec.name.removesuffix(".__main__")]
    else:
        script = sys.argv[0]
        try:
            script = str(Path(script).resolve().relative_to(Path.cwd()))
        except ValueError:
            pass
        head = ["python", script]
    return " ".join([shlex.join(head), *(_shell_word(portable_path(a)) for a in sys.argv[1:])])


@dataclass
class BenchmarkRecord:
    """One benchmark result in the shared schema (see the module docstring).

    Attributes:
        experiment: folder under ``benchmarks/results/`` (e.g. ``care_real_weights``).
        name: file stem inside it (e.g. ``toyhom_seed0``); short and free of settings.
        config: the settings that produced the figures (round-trips to JSON).
        seeds: the seeds the figures cover.
        scores: quality figures, ``{row: {metric: value}}`` or ``{metric: value}``.
        latencies: speed figures in ms (with their spread where measured), same nesting freedom.
        extra: anything else worth keeping (wall times, notes, per-seed values).
        command / commit / date / machine: filled in by :func:`write_record` when left empty.
    """

    experiment: str
    name: str
    config: dict[str, Any]
    seeds: list[int] = field(default_factory=list)
    scores: dict[str, Any] = field(default_factory=dict)
    latencies: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    command: str = ""
    commit: str = ""
    date: str = ""
    machine: dict[str, Any] = field(default_factory=dict)
    schema: int = RECORD_SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "benchmark record") -> BenchmarkRecord:
        missing = [f for f in REQUIRED_FIELDS if f not in data]
        if missing:
            raise CareError(f"{source}: not a benchmark record (missing {', '.join(missing)}); "
                            "write it with care.bench.record.write_record")
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


def pin_commit(results_root: str | Path, *, allow_dirty: bool = False, where: str = "this run") -> str:
    """Take the code this process runs now, for every record it later writes under ``results_root``.

    A long run (hours of training) calls it at its start: a commit made in the checkout while it trains is not the
    code that trained, and :func:`write_record` would otherwise ask git when the record is written.

    Args:
        results_root: where the records go (its checkout is asked).
        allow_dirty: accept uncommitted changes to tracked files (``--allow-dirty``); the records then keep the
            diff's SHA-256 (:data:`DIFF_HASH_KEY`).
        where: the script or command, for the refusal.
    Returns:
        The pinned commit (:func:`git_commit`).
    Raises:
        CareError: the tree is dirty and ``allow_dirty`` is off.
    """
    state = require_clean(code_state(results_root), allow_dirty=allow_dirty, where=where)
    _PINNED[Path(results_root).resolve()] = state
    return state.commit


def write_record(record: BenchmarkRecord, results_root: str | Path) -> Path:
    """Fill in command, commit (the one :func:`pin_commit` took, else the checkout's now; with the diff's hash in
    ``extra`` when dirty), date and machine (where empty) and write the record atomically.

    Returns:
        ``<results_root>/<experiment>/<name>.json``.
    Raises:
        CareError: no experiment or a bad name, or a commit given by hand that is not the checkout's.
    """
    if not record.experiment or not record.name or "/" in record.name:
        raise CareError(f"benchmark record needs an experiment and a plain file name, got "
                        f"{record.experiment!r} / {record.name!r}")
    state = _PINNED.get(Path(results_root).resolve()) or code_state(results_root)
    if record.commit and record.commit != state.commit:
        raise CareError(f"benchmark record {record.experiment}/{record.name}: commit {record.commit!r} was given, but "
                        f"the code is {state.commit!r}; leave the commit empty (write_record takes it from the "
                        f"checkout, or from ${COMMIT_ENV} where the tree travelled without .git)")
    record.command = record.command or invocation()
    record.commit = state.commit
    if state.dirty:
        record.extra = {**record.extra, DIFF_HASH_KEY: state.diff_sha256}
    record.date = record.date or time.strftime("%Y-%m-%dT%H:%M:%S%z")
    record.machine = record.machine or machine_info()
    path = Path(results_root) / record.experiment / f"{record.name}.json"
    json.dumps(record.to_dict())  # fail before touching the file when something is not JSON
    write_json(path, record.to_dict())
    return path


def read_records(results_root: str | Path, experiment: str) -> dict[str, BenchmarkRecord]:
    """Every record of ``experiment``, by file stem (sorted)."""
    folder = Path(results_root) / experiment
    out = {}
    for path in sorted(folder.glob("*.json")):
        out[path.stem] = BenchmarkRecord.from_dict(json.loads(path.read_text(encoding="utf-8")), str(path))
    return out
