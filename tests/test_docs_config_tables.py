"""The docs' config reference tables name exactly the fields of the typed configs they describe.

These tables are what users configure from: a training stage's fields (docs/training.md,
:class:`care.train.engine.config.TrainConfig`), a run config's sections and fields (docs/pipeline.md,
:class:`care.pipeline.config.RunConfig`), and the flat tables of the index, index build, benchmark run,
service, diversify and STS options (:data:`FLAT_TABLES`). A field added to a config without a row, or a row
left behind by a removed field, fails here with its name.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from care.bench.options import RunOptions
from care.curate.diversify import DiversifyConfig
from care.curate.sts import StsConfig
from care.index.build import BuildOptions
from care.index.config import IndexConfig
from care.pipeline.config import RunConfig
from care.serve.config import ServeConfig
from care.train.engine.config import TrainConfig

DOCS = Path(__file__).resolve().parents[1] / "docs"
CODE = re.compile(r"`([^`]+)`")
#: The run table's section cell for RunConfig's own (non-section) fields.
TOP_LEVEL = "(top level)"


def field_paths(cls: type, prefix: str = "", whole: frozenset[str] = frozenset()) -> set[str]:
    """Dotted paths of a dataclass's leaf fields; a nested config is walked unless its path is in ``whole``
    (a field the docs describe as one value, such as ``model.lora``)."""
    paths: set[str] = set()
    for f in dataclasses.fields(cls):
        path = f"{prefix}{f.name}"
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(default) and path not in whole:
            paths |= field_paths(type(default), f"{path}.", whole)
        else:
            paths.add(path)
    return paths


def table_rows(doc: Path, start: str) -> list[list[str]]:
    """The cells of the rows of the first markdown table after the first occurrence of ``start`` in ``doc``
    (header and separator rows left out)."""
    text = doc.read_text(encoding="utf-8")
    assert start in text, f"{doc} lost the text {start!r} that opens its config table"
    rows: list[list[str]] = []
    for line in text.split(start, 1)[1].splitlines():
        if not line.startswith("|"):
            if rows:
                break
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        rows.append(cells)
    return [cells for cells in rows[1:] if not set("".join(cells)) <= set("-: ")]  # rows[0]: the header


def expand_names(cell: str) -> set[str]:
    """The dotted names of a first-column cell: ```model.teacher.kind` / `.spec``` names ``model.teacher.spec``;
    ```optim.lr` / `weight_decay``` names ``optim.weight_decay`` (a sibling of the cell's first name)."""
    names = CODE.findall(cell)
    if not names:
        return set()
    first = names[0]
    parent = first.rsplit(".", 1)[0] + "." if "." in first else ""
    out = {first}
    for name in names[1:]:
        if name.startswith("."):
            out.add(parent + name[1:])
        elif "." in name:
            out.add(name)
        else:
            out.add(parent + name)
    return out


def test_training_table_names_every_stage_field():
    rows = table_rows(DOCS / "training.md", "Every field (default in the second column")
    documented = set().union(*(expand_names(row[0]) for row in rows))
    expected = field_paths(TrainConfig, whole=frozenset({"model.lora"}))
    assert not expected - documented, f"docs/training.md's field table lacks {sorted(expected - documented)}"
    assert not documented - expected, f"docs/training.md's field table names unknown fields {sorted(documented - expected)}"


def test_run_table_names_every_run_field():
    rows = table_rows(DOCS / "pipeline.md", "| section | field | default | meaning |")
    documented: set[str] = set()
    section = ""
    for row in rows:
        if row[0]:
            section = row[0].strip("`")
        prefix = "" if section == TOP_LEVEL else f"{section}."
        names = CODE.findall(row[1].split("{", 1)[0])  # `{name: {label, ...}}`: a dict's entries, not fields
        documented |= {prefix + name for name in names} if names else {section}
    # the student's own config is documented in docs/training.md; the entries of dict fields
    # (recipes.care.ablations, recipes.baselines) are described inside their rows
    expected = field_paths(RunConfig, whole=frozenset({"recipes.student.settings"}))
    assert not expected - documented, f"docs/pipeline.md's run config table lacks {sorted(expected - documented)}"
    assert not documented - expected, f"docs/pipeline.md's run config table names unknown fields {sorted(documented - expected)}"


#: ``(doc, the line that opens the table, the class)`` of the tables whose first column lists a class's own
#: fields, each with its CLI flag in brackets where it has one (```chunk_size` [`--chunk-size`]``).
FLAT_TABLES = (
    ("index.md", "`care.index.config.IndexConfig`", IndexConfig),
    ("index.md", "`care.index.build.BuildOptions`", BuildOptions),
    ("bench.md", "`care.bench.options.RunOptions`", RunOptions),
    ("serve.md", "`--config` is a JSON object of `care.serve.config.ServeConfig` fields", ServeConfig),
    ("curate.md", "`care.curate.diversify.DiversifyConfig`", DiversifyConfig),
    ("curate.md", "`care.curate.sts.StsConfig`", StsConfig),
)


@pytest.mark.parametrize(("doc", "start", "cls"), FLAT_TABLES, ids=[cls.__name__ for _, _, cls in FLAT_TABLES])
def test_flat_table_names_every_field(doc: str, start: str, cls: type):
    rows = table_rows(DOCS / doc, start)
    documented = {name for row in rows for name in CODE.findall(row[0]) if not name.startswith("-")}
    expected = {f.name for f in dataclasses.fields(cls)}
    assert documented == expected, (f"docs/{doc}'s {cls.__name__} table: missing {sorted(expected - documented)}, "
                                    f"unknown {sorted(documented - expected)}")


def test_expand_names_reads_the_table_shorthands():
    assert expand_names("`model.teacher.kind` / `.spec` / `.factory`") == {
        "model.teacher.kind", "model.teacher.spec", "model.teacher.factory"}
    assert expand_names("`optim.lr` / `weight_decay`") == {"optim.lr", "optim.weight_decay"}
    assert expand_names("`stage`") == {"stage"}
    assert expand_names("no code") == set()
