"""Checks of the machine: writable folders (embedding cache, run folder), free disk, environment variables."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from care.doctor.result import CheckResult

GIB = 1024**3
#: Below this much free space a core check fails (a run cannot even write its checkpoints).
MIN_FREE_BYTES = GIB // 2
#: Below this much free space the doctor warns: the demo needs well under 1 GiB, but a real model
#: (Qwen3-4B in bf16 is ~8 GB) plus its checkpoints and corpus vectors need tens of GiB.
LOW_FREE_BYTES = 20 * GIB
DATA_ROOT_ENV = "CMEDTEB_DATA"
CACHE_ENV = "CARE_CACHE_DIR"
#: Environment variables that hold LLM judge / embedding API keys in the shipped docs and defaults
#: (any other name can be configured with ``api_key_env``).
JUDGE_KEY_ENVS: tuple[str, ...] = ("OPENAI_API_KEY", "DASHSCOPE_API_KEY", "DEEPSEEK_API_KEY")
OPENAI_BASE_URL_ENV = "OPENAI_BASE_URL"


def existing_ancestor(path: Path) -> Path:
    """``path`` itself or its nearest ancestor that exists (a file or a folder)."""
    path = path.expanduser().absolute()
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(path.anchor)


def writable_reason(path: Path) -> str | None:
    """None when ``path`` is (or could be created as) a writable folder, else why not.

    Writes and deletes a temporary file in the folder (or its nearest existing ancestor) rather than
    trusting ``os.access``, which says yes to root even on read-only mounts.
    """
    path = path.expanduser().absolute()
    base = existing_ancestor(path)
    if not base.is_dir():
        return f"{base} is a file, not a folder"
    try:
        with tempfile.NamedTemporaryFile(dir=base, prefix=".care-doctor-"):
            pass
    except OSError as exc:
        return f"cannot write in {base}: {exc.strerror or exc}"
    return None


def check_writable(label: str, path: Path, *, env: str | None = None, core: bool = True) -> CheckResult:
    """``path`` is a writable folder (or can be created). ``env`` names the variable that moves it."""
    path = path.expanduser()
    reason = writable_reason(path)
    state = "exists" if path.is_dir() else "will be created"
    if reason is None:
        return CheckResult(label, "ok", f"{path} ({state}, writable)", core=core)
    how = f"export {env}=/a/writable/folder" if env else "pass a writable folder"
    return CheckResult(label, "missing" if core else "warn", f"{path}: {reason}",
                       fix=f"{how}, or make it writable: mkdir -p {path} && chmod u+w {path}", core=core)


def check_disk(label: str, path: Path, *, min_free: int = MIN_FREE_BYTES, low_free: int = LOW_FREE_BYTES) -> CheckResult:
    """Free space on the file system holding ``path``: fail under ``min_free``, warn under ``low_free``."""
    base = existing_ancestor(path)
    if not base.is_dir():
        base = base.parent
    free = shutil.disk_usage(base).free
    detail = f"{free / GIB:.1f} GiB free on the file system of {base}"
    if free < min_free:
        return CheckResult(label, "missing", detail + f" (care needs at least {min_free / GIB:.1f} GiB)",
                           fix="free some space or point the folder elsewhere", core=True)
    if free < low_free:
        return CheckResult(label, "warn", detail + f"; enough for the demo, not for real models "
                           f"(Qwen3-4B is ~8 GB in bf16; keep >= {low_free / GIB:.0f} GiB)",
                           fix="free some space or put runs / caches on a larger disk", core=True)
    return CheckResult(label, "ok", detail, core=True)


def check_data_root(environ: Mapping[str, str] | None = None) -> CheckResult:
    """``$CMEDTEB_DATA``: the folder holding the registered CMedTEB tasks' data (optional)."""
    env = os.environ if environ is None else environ
    value = env.get(DATA_ROOT_ENV)
    if not value:
        return CheckResult(DATA_ROOT_ENV, "warn", "not set: registered CMedTEB tasks need --data-root "
                           "(task folders and the embedded demo work without it)",
                           fix=f"export {DATA_ROOT_ENV}=/path/with/one/folder/per/task   (formats: docs/bench.md)")
    path = Path(value).expanduser()
    if not path.is_dir():
        return CheckResult(DATA_ROOT_ENV, "warn", f"{path} is not a folder",
                           fix=f"export {DATA_ROOT_ENV}= a folder with one subfolder per task")
    tasks = sorted(p.name for p in path.iterdir() if p.is_dir())
    shown = ", ".join(tasks[:5]) + (", ..." if len(tasks) > 5 else "")
    return CheckResult(DATA_ROOT_ENV, "ok", f"{path}: {len(tasks)} task folder(s)" + (f" ({shown})" if tasks else ""))


def check_judge_keys(environ: Mapping[str, str] | None = None, names: tuple[str, ...] = JUDGE_KEY_ENVS) -> CheckResult:
    """Which LLM API key variables are set (names only; values are never shown)."""
    env = os.environ if environ is None else environ
    found = [n for n in names if env.get(n)]
    base_url = env.get(OPENAI_BASE_URL_ENV)
    where = f"; {OPENAI_BASE_URL_ENV}={base_url}" if base_url else ""
    if found:
        return CheckResult("LLM API keys", "ok", f"set: {', '.join(found)}{where}")
    return CheckResult("LLM API keys", "warn", f"none of {', '.join(names)} is set{where}: hosted LLM judges and "
                       "'openai:' models need one (the offline judge and keyless local servers do not)",
                       fix="export OPENAI_API_KEY=...   (or the variable named by a judge's api_key_env)")
