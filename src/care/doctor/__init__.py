"""``care doctor``: check the environment (Python, torch and GPUs, faiss, optional extras, writable
folders, free disk, environment variables) and say what is missing and how to install it.

Python API::

    from care.doctor import run_checks, core_ok
    results = run_checks(run_dir="runs")       # list[CheckResult]
    ok = core_ok(results)                      # False when a core requirement is missing
"""

from care.doctor.result import CheckResult, Status, core_ok
from care.doctor.runner import run_checks

__all__ = ["CheckResult", "Status", "core_ok", "run_checks"]
