"""Settings travel typed inside the package (issue 61): no module under ``src/care`` builds a ``key=value`` /
``stage:key=value`` settings string for something else to parse again. ``key=value`` is user syntax, read once at the
edge (:func:`care.train.stage_settings.parse_settings`, :func:`care.config.parse_override`); a command's typed flag
is passed as a typed pair or :class:`~care.train.stage_settings.StageSetting`.

The check reads every module's string literals and f-strings (docstrings aside: they show users the syntax) and
fails on one that is a setting: ``[stage:]key=value`` as the whole literal, its key a field of a run, stage or student
config or prefixed by a stage (``optim.lr=2e-4``, ``{stage}:data.max_examples={n}``, ``seed={seed}``). Messages and
labels that show values (``k=5 is larger than ...``, ``nprobe=16``) are not settings. A model spec's options (``pooling=mean&query_prefix=...``: a URL query) are another syntax, read
by :mod:`care.encoders.registry`, and are not settings.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "care"
#: ``[stage:]dotted.key=value`` as a whole literal (the value one token); ``{}`` stands for an f-string's formatted part.
SETTING = re.compile(r"\s*(?:(\{\}|[a-z][a-z0-9_]*)\s*:\s*)?([a-z][a-z0-9_]*)(?:\.[a-z0-9_]+)*\s*=(?!=)[^\s,;]*")
#: A model spec's option string (URL query syntax), not a setting.
SPEC_OPTIONS = "&"


def setting_roots() -> set[str]:
    """The first parts of every settings key a command reads: a stage config's sections and fields, a run config's,
    a student config's (``{}`` for a formatted one)."""
    from care.pipeline.config import RunConfig
    from care.train.engine.config import TrainConfig
    from care.train.recipes.student import StudentConfig

    fields = {f.name for cls in (RunConfig, TrainConfig, StudentConfig) for f in dataclasses.fields(cls)}
    return fields | {"{}"}


def _docstrings(tree: ast.AST) -> set[int]:
    nodes = [n for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                                         ast.AsyncFunctionDef))]
    return {id(n.body[0].value) for n in nodes
            if n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}


def _text(node: ast.AST) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def built_settings(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every string in ``source`` that reads as a ``key=value`` setting."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    roots = setting_roots()
    inner = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}  # an f-string's parts
    found = []
    for node in ast.walk(tree):
        text = _text(node)
        if text is None or id(node) in skip or id(node) in inner or SPEC_OPTIONS in text:
            continue
        match = SETTING.fullmatch(text)
        if match and (match.group(1) or match.group(2) in roots) and not text.startswith("{}={}"):
            found.append((node.lineno, text))
    return found


def test_the_check_catches_what_the_recipe_used_to_build():
    old = '''
def care_overrides(recipe, stage, config):
    out = [f"seed={config.seed}", "runtime.log_with=null", f"{stage}:data.max_examples={recipe.n}"]
    out.append(f"stage2:data.n_negatives={recipe.k}")
    return [*out, *(f"{k}={v}" for k, v in recipe.typed.items()), "init_document:model.lora=null"]
'''
    assert [text for _, text in built_settings(old)] == [
        "seed={}", "runtime.log_with=null", "{}:data.max_examples={}", "stage2:data.n_negatives={}",
        "init_document:model.lora=null"]
    fine = '''
def f(x):
    """``stage1:optim.lr=2e-4`` sets Stage I's rate."""
    raise ValueError(f"override {x!r}: expected KEY=VALUE, e.g. optim.lr=2e-5")
SPEC = "pooling=mean&query_prefix=query%3A+&instructions=false"
same = x == "a"
'''
    assert built_settings(fine) == []


def test_no_module_builds_a_settings_string():
    found = {f"{path.relative_to(SRC.parent)}:{line}": text for path in sorted(SRC.rglob("*.py"))
             for line, text in built_settings(path.read_text(encoding="utf-8"))}
    assert not found, ("key=value settings built inside the package — pass typed values (StageSetting, a "
                       f"(key, value) pair, dataclasses.replace) instead: {found}")
