"""Checks of the software: Python, care's core packages, torch and its GPUs, faiss, the optional extras."""

from __future__ import annotations

import importlib
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from care.doctor.packages import module_present, package_state, pip_command
from care.doctor.requirements import Package, Requirements
from care.doctor.result import CheckResult

MIN_PYTHON: tuple[int, int] = (3, 10)
#: Packages with a row of their own (and a special fix), left out of the "core packages" row.
OWN_ROW_MODULES = frozenset({"torch", "faiss"})
#: Compute capability from which a GPU has native bfloat16 (Ampere).
BF16_MIN_CAPABILITY = 8
GIB = 1024**3

TORCH_FIX = ("CPU: pip install torch --index-url https://download.pytorch.org/whl/cpu; GPU: the command for your "
             "CUDA version from https://pytorch.org/get-started/locally/ (install torch BEFORE care: an unpinned "
             "'pip install torch' on Linux pulls GBs of CUDA wheels)")
TORCH_CUDA_FIX = "on a GPU machine, reinstall a CUDA build of torch: https://pytorch.org/get-started/locally/"
DEEPSPEED_FIX = "pip install deepspeed   (needs a CUDA toolkit; only for runtime.deepspeed_config, e.g. configs/deepspeed/zero2.json)"
CHROMIUM_ENV = "CARE_CHROMIUM"
CHROMIUM_CANDIDATES: tuple[str, ...] = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
CHROMIUM_FIX = f"apt-get install -y --no-install-recommends chromium   (or export {CHROMIUM_ENV}=/path/to/chrome)"
#: What each optional extra is for (shown in the detail column).
EXTRA_PURPOSE: dict[str, str] = {
    "e5": "multilingual-e5-small baseline / teacher (model spec 'e5')",
    "mteb": "mteb interop and C-MTEB medical tasks",
    "api": "OpenAI-compatible embedding APIs ('openai:MODEL')",
    "train": "TensorBoard logs and datasets for training",
    "serve": "the HTTP service (care serve)",
    "onnx": "ONNX export and int8 query encoding (care export-onnx, --onnx)",
    "milvus": "Milvus / milvus-lite index backend (--backend milvus)",
    "plots": "quality-vs-QPS plots (benchmarks)",
    "browser": "the search-page browser test",
    "curate": "LLM judges and agreement statistics (care curate)",
    "dev": "running the test suite",
}


def check_python(version: Sequence[int] | None = None, minimum: tuple[int, int] = MIN_PYTHON) -> CheckResult:
    """Python >= ``minimum`` (pyproject's requires-python)."""
    v = tuple(version if version is not None else sys.version_info[:3])
    text = ".".join(str(p) for p in v)
    need = ".".join(str(p) for p in minimum)
    if v[:2] >= minimum:
        return CheckResult("python", "ok", f"{text} ({sys.executable})", core=True)
    return CheckResult("python", "missing", f"{text}; care needs >= {need}",
                       fix=f"install Python >= {need} and create a new venv: python3.11 -m venv .venv", core=True)


def check_requirements_source(reqs: Requirements) -> CheckResult:
    """Where the list of packages came from (the source checkout's pyproject.toml or installed metadata)."""
    if reqs.source == "none":
        return CheckResult("care install", "warn", "care-retrieval is not installed and no pyproject.toml was found; "
                           "package checks below are incomplete", fix="pip install -e '.[all]'   (from the repository root)")
    from care.doctor.packages import installed_version

    version = installed_version("care-retrieval") or "not installed as a distribution"
    if version == "not installed as a distribution":
        return CheckResult("care install", "warn", f"running from source; requirements from {reqs.source}",
                           fix="pip install -e '.[all]'   (from the repository root; adds the 'care' command)")
    return CheckResult("care install", "ok", f"care-retrieval {version}; requirements from {reqs.source}")


def check_core_packages(packages: Sequence[Package]) -> CheckResult:
    """Every core dependency except torch and faiss (they have their own rows) is importable and recent enough."""
    states = [package_state(p) for p in packages if p.module not in OWN_ROW_MODULES]
    bad = [s for s in states if not s.ok]
    if not bad:
        return CheckResult("core packages", "ok", f"{len(states)} installed", core=True)
    return CheckResult("core packages", "missing", "; ".join(s.describe() for s in bad), fix=pip_command(bad), core=True)


def _import(module: str) -> tuple[ModuleType | None, str]:
    """Import ``module``; on failure return (None, reason) — a broken install is as bad as none."""
    if not module_present(module):
        return None, "not installed"
    try:
        return importlib.import_module(module), ""
    except Exception as exc:  # noqa: BLE001 - any import failure (missing shared library, ABI) is reported
        return None, f"import failed: {type(exc).__name__}: {exc}"


def torch_build(torch: Any) -> str:
    """``"CUDA 12.8"``, ``"ROCm 6.2"`` or ``"CPU-only"``."""
    version = getattr(torch, "version", None)
    if getattr(version, "cuda", None):
        return f"CUDA {version.cuda}"
    if getattr(version, "hip", None):
        return f"ROCm {version.hip}"
    return "CPU-only"


def check_torch(packages: Sequence[Package], torch: Any = None) -> CheckResult:
    """torch imports, meets the version floor; detail = version and build (CPU / CUDA / ROCm)."""
    from care.doctor.packages import satisfies

    spec = next((p.specifier for p in packages if p.module == "torch"), "")
    if torch is None:
        torch, reason = _import("torch")
        if torch is None:
            return CheckResult("torch", "missing", reason, fix=TORCH_FIX, core=True)
    version = str(getattr(torch, "__version__", "unknown"))
    if not satisfies(version, spec):
        return CheckResult("torch", "missing", f"{version} (needs {spec})", fix=TORCH_FIX, core=True)
    return CheckResult("torch", "ok", f"{version}, {torch_build(torch)} build, {torch.get_num_threads()} CPU threads", core=True)


def check_cuda(torch: Any = None) -> CheckResult:
    """Whether torch sees a CUDA GPU (optional: the demo, bench, index and serve run on CPU)."""
    if torch is None:
        torch, reason = _import("torch")
        if torch is None:
            return CheckResult("cuda", "warn", f"torch {reason}", fix=TORCH_FIX)
    build = torch_build(torch)
    if not torch.cuda.is_available():
        if build == "CPU-only":
            return CheckResult("cuda", "warn", "CPU-only torch build: enough for the demo, bench, index and serve; "
                               "paper-scale training needs CUDA GPUs", fix=TORCH_CUDA_FIX)
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        extra = f"; CUDA_VISIBLE_DEVICES={visible!r}" if visible is not None else ""
        return CheckResult("cuda", "warn", f"{build} build but no usable GPU{extra}",
                           fix="check the driver with nvidia-smi (it must support the build's CUDA version) and CUDA_VISIBLE_DEVICES")
    n = torch.cuda.device_count()
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return CheckResult("cuda", "ok", f"{n} GPU(s), {build}" + (f", cuDNN {cudnn}" if cudnn else ""))


def check_gpu(index: int, torch: Any) -> CheckResult:
    """One GPU: name, memory, compute capability, native bf16 (paper configs use bf16)."""
    props = torch.cuda.get_device_properties(index)
    bf16 = props.major >= BF16_MIN_CAPABILITY
    detail = (f"{props.name}, {props.total_memory / GIB:.1f} GiB, compute capability {props.major}.{props.minor}, "
              f"bf16 {'yes' if bf16 else 'no'}")
    if bf16:
        return CheckResult(f"gpu {index}", "ok", detail)
    return CheckResult(f"gpu {index}", "warn", detail + " (no native bf16 before compute capability 8.0)",
                       fix="train with --set runtime.mixed_precision=fp16 (the paper configs set bf16)")


def check_gpus(torch: Any = None) -> list[CheckResult]:
    """One row per visible CUDA GPU (none when CUDA is unavailable)."""
    if torch is None:
        torch, _ = _import("torch")
    if torch is None or not torch.cuda.is_available():
        return []
    return [check_gpu(i, torch) for i in range(torch.cuda.device_count())]


#: Where transformers keeps the oldest peft its LoRA integration accepts.
TRANSFORMERS_PEFT_MODULE = "transformers.integrations.peft"
PEFT_PIN_FIX = ("bash scripts/setup.sh   (installs the versions in constraints.txt), or pip install "
                "'transformers<{transformers}' to keep this peft")


def check_peft_compat(transformers_version: str | None = None, peft_version: str | None = None,
                      min_peft: str | None = None) -> CheckResult:
    """The installed peft is at least the release the installed transformers requires for LoRA.

    transformers can be released ahead of the peft it needs (5.24 asked for peft >= 0.22 before that
    existed); then every LoRA document encoder fails to build. The arguments default to what is installed.
    """
    from care.doctor.packages import installed_version, satisfies

    transformers_version = transformers_version or installed_version("transformers")
    peft_version = peft_version or installed_version("peft")
    if transformers_version is None or peft_version is None:
        return CheckResult("peft / transformers", "missing", "transformers or peft is not installed",
                           fix="bash scripts/setup.sh", core=True)
    if min_peft is None:
        module, reason = _import(TRANSFORMERS_PEFT_MODULE)
        if module is None:
            return CheckResult("peft / transformers", "missing", f"{TRANSFORMERS_PEFT_MODULE} {reason}",
                               fix="bash scripts/setup.sh", core=True)
        min_peft = str(getattr(module, "MIN_PEFT_VERSION", ""))
    detail = f"peft {peft_version}, transformers {transformers_version} (needs peft >= {min_peft or '?'})"
    if satisfies(peft_version, f">={min_peft}" if min_peft else ""):
        return CheckResult("peft / transformers", "ok", detail, core=True)
    return CheckResult("peft / transformers", "missing", detail + ": LoRA document encoders cannot be built",
                       fix=PEFT_PIN_FIX.format(transformers=transformers_version), core=True)


def check_faiss(packages: Sequence[Package]) -> CheckResult:
    """faiss imports (care's index, benchmark search and diversify filter use it)."""
    pkg = next((p for p in packages if p.module == "faiss"), Package("faiss-cpu", "faiss-cpu", "faiss"))
    faiss, reason = _import("faiss")
    if faiss is None:
        return CheckResult("faiss", "missing", reason, fix=f'pip install "{pkg.requirement}"', core=True)
    return CheckResult("faiss", "ok", f"{getattr(faiss, '__version__', 'version unknown')}", core=True)


def check_faiss_gpu(torch: Any = None) -> CheckResult:
    """GPUs visible to faiss. Informational: care builds and searches its indexes on CPU."""
    faiss, reason = _import("faiss")
    if faiss is None:
        return CheckResult("faiss gpu", "warn", f"faiss {reason}", fix='pip install "faiss-cpu>=1.8"')
    n = faiss.get_num_gpus() if hasattr(faiss, "get_num_gpus") else 0
    return CheckResult("faiss gpu", "ok", f"{n} GPU(s) visible to faiss (not needed: care's indexes run on CPU FAISS)")


def check_extra(name: str, packages: Sequence[Package]) -> CheckResult:
    """An optional extra: every package importable and recent enough, else a warning with the pip command."""
    states = [package_state(p) for p in packages]
    bad = [s for s in states if not s.ok]
    purpose = EXTRA_PURPOSE.get(name, "")
    label = f"extra [{name}]"
    if not bad:
        return CheckResult(label, "ok", ", ".join(s.describe() for s in states))
    detail = "; ".join(s.describe() for s in bad) + (f" — needed for {purpose}" if purpose else "")
    return CheckResult(label, "warn", detail, fix=f"{pip_command(bad)}   (or pip install -e '.[{name}]')")


#: Rows that follow an extra's row: tools the extra's features use that pip extras cannot install.
EXTRA_COMPANIONS: dict[str, tuple[str, ...]] = {"train": ("deepspeed",), "browser": ("chromium",)}


def check_extras(reqs: Requirements) -> list[CheckResult]:
    """One row per optional extra in pyproject order, followed by its companions (deepspeed, chromium)."""
    companions = {"deepspeed": check_deepspeed, "chromium": check_chromium}
    rows: list[CheckResult] = []
    for name, pkgs in reqs.extras.items():
        rows.append(check_extra(name, pkgs))
        rows.extend(companions[c]() for c in EXTRA_COMPANIONS.get(name, ()))
    return rows


def check_deepspeed() -> CheckResult:
    """DeepSpeed (optional, ZeRO for the 4B/8B document tower); only its presence is checked."""
    if module_present("deepspeed"):
        from care.doctor.packages import installed_version

        return CheckResult("deepspeed", "ok", f"{installed_version('deepspeed') or 'version unknown'} (ZeRO via runtime.deepspeed_config)")
    return CheckResult("deepspeed", "warn", "not installed — optional: ZeRO sharding for the paper's 4B/8B document tower",
                       fix=DEEPSPEED_FIX)


def find_chromium(candidates: Sequence[str] = CHROMIUM_CANDIDATES) -> str | None:
    """``$CARE_CHROMIUM``, a known install path, or ``chromium`` on PATH (the browser test's lookup)."""
    env = os.environ.get(CHROMIUM_ENV)
    if env:
        return env if Path(env).exists() else None
    return next((p for p in candidates if Path(p).exists()), None) or shutil.which("chromium")


def check_chromium() -> CheckResult:
    """A Chromium binary for the search-page browser test (tests/serve/test_web.py)."""
    path = find_chromium()
    if path:
        return CheckResult("chromium", "ok", f"{path} (search-page browser test)")
    env = os.environ.get(CHROMIUM_ENV)
    where = f"{CHROMIUM_ENV}={env!r} does not exist" if env else "no chromium found"
    return CheckResult("chromium", "warn", f"{where}; the search-page browser test will skip", fix=CHROMIUM_FIX)
