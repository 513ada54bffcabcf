"""The generated sections of README.md and docs/*.md: which table fills each ``<!-- results:NAME -->`` ...
``<!-- /results:NAME -->`` section (:data:`TABLES`), and which documents are out of date with their records.

Each table reads records (:mod:`care.bench.record`) and returns Markdown; the prose around a section stays
hand-written (:func:`care.bench.tables.replace_sections`). ``care bench report`` rewrites the stale documents;
``care bench report --check`` only names them (what the tests run).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from care.bench.reports.demo import demo_table
from care.bench.reports.frontier import frontier_table
from care.bench.reports.gpu_shapes import gpu_shapes_tables
from care.bench.reports.index import results_index
from care.bench.reports.paths import RESULTS, ROOT
from care.bench.reports.pii import pii_table, pii_taggers_table
from care.bench.reports.real_weights import real_weights_gpu_table, real_weights_table
from care.bench.reports.toyhom import care_table, harness_table
from care.bench.reports.transfer import transfer_table
from care.bench.tables import replace_sections, section_names
from care.data.io import atomic_write

#: The documents whose marked sections are generated (relative to the repository).
DOCUMENTS: tuple[str, ...] = ("README.md", "docs/results.md", "docs/paper-setup.md", "docs/curate.md", "docs/demo.md")

#: Section name -> the table that fills it, from a results folder.
TABLES: dict[str, Callable[[Path], str]] = {"transfer-table": transfer_table, "frontier-table": frontier_table, "demo-table": demo_table,"harness-table": harness_table, "care-table": care_table,
                                            "real-weights-table": real_weights_table, "results-index": results_index,
                                            "real-weights-gpu-table": real_weights_gpu_table,
                                            "gpu-shapes-tables": gpu_shapes_tables, "pii-table": pii_table,
                                            "pii-taggers-table": pii_taggers_table}


def render(document: Path, results: Path = RESULTS) -> str:
    """``document``'s text with every marked section it has regenerated."""
    text = document.read_text(encoding="utf-8")
    names = [n for n in section_names(text) if n in TABLES]
    return replace_sections(text, {n: TABLES[n](results) for n in names}, source=str(document))


def stale_documents(root: Path = ROOT, results: Path = RESULTS,
                    documents: Sequence[str] = DOCUMENTS) -> dict[str, str]:
    """``{document: its regenerated text}`` of every document under ``root`` whose generated sections differ
    from what the records under ``results`` give (a number edited by hand in a table, a record rerun)."""
    stale = {}
    for name in documents:
        path = root / name
        new = render(path, results)
        if new != path.read_text(encoding="utf-8"):
            stale[name] = new
    return stale


def rewrite_documents(root: Path = ROOT, results: Path = RESULTS,
                      documents: Sequence[str] = DOCUMENTS) -> list[str]:
    """Rewrite (atomically) every stale document under ``root``; returns their names."""
    stale = stale_documents(root, results, documents)
    for name, text in stale.items():
        with atomic_write(root / name) as fh:
            fh.write(text)
    return list(stale)
