"""Run every check in a fixed order."""

from __future__ import annotations

from pathlib import Path

from care.doctor import software, system
from care.doctor.requirements import Requirements, load_requirements
from care.doctor.result import CheckResult

#: Where training / demo runs write by default (the shipped configs use runs/<recipe>/<stage>).
DEFAULT_RUN_DIR = Path("runs")


def run_checks(run_dir: Path | str = DEFAULT_RUN_DIR, cache_dir: Path | str | None = None,
               requirements: Requirements | None = None) -> list[CheckResult]:
    """Check the environment; returns one :class:`CheckResult` per row of the doctor's table.

    Args:
        run_dir: the folder runs will be written to (checked for write access and free space).
        cache_dir: the embedding cache folder (default ``$CARE_CACHE_DIR`` or ``~/.cache/care/embeddings``,
            as :func:`care.encoders.cache.default_cache_dir`).
        requirements: the package lists (default: read from pyproject.toml / installed metadata).
    """
    from care.encoders.cache import default_cache_dir

    reqs = requirements or load_requirements()
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    run = Path(run_dir)
    results: list[CheckResult] = [
        software.check_python(),
        software.check_requirements_source(reqs),
        software.check_core_packages(reqs.core),
        software.check_torch(reqs.core),
        software.check_peft_compat(),
        software.check_cuda(),
        *software.check_gpus(),
        software.check_faiss(reqs.core),
        software.check_faiss_gpu(),
        *software.check_extras(reqs),
        system.check_writable("embedding cache", cache, env=system.CACHE_ENV),
        system.check_writable("run folder", run),
        system.check_disk("disk (cache)", cache),
        system.check_disk("disk (runs)", run),
        system.check_data_root(),
        system.check_judge_keys(),
    ]
    return results
