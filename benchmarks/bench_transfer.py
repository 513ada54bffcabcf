"""Does CARE keep its gain on data it was not tuned on? A thin driver of ``care run`` on two dev sets.

Per dev set and seed this runs the pipeline (:func:`care.pipeline.run.run_pipeline`) on its shipped run config
— real weights from one config line (``models: {query: "e5?layers=6", document: e5}``), the ``e5`` preset, the
safety net's validation split — into ``<work>/<dataset>/seed<k>`` (resumable), then records, over seeds, the
main task's nDCG@10 (test queries against the full corpus) and the validation split's of every row, each CARE
stage's validation check, the step and stage wall times and the targets of issue 43 (CARE ≥ 97 % of symmetric
large, ≥ symmetric small + 0.02, ≥ e5 zero-shot) to ``benchmarks/results/transfer/<dataset>.json`` and a
Markdown table beside it.

- ``toyhom``: long patient questions -> doctor answers (``configs/runs/care_toyhom_e5.yaml``; ``$CARE_DEV_SET``);
- ``kuake_qtr``: short search queries -> page titles, a BEIR folder (``configs/runs/care_kuake_qtr.yaml``).

Usage::

    python -m benchmarks.bench_transfer --dataset kuake_qtr --seeds 0 1 2
    python -m benchmarks.bench_transfer --dataset kuake_qtr --seeds 0 --without-stored-prompts   # the prompt check
    CARE_DEV_SET=/path/to/toyhom_neike_sample python -m benchmarks.bench_transfer --dataset toyhom --seeds 0
    CARE_DEV_SET=... python -m benchmarks.bench_transfer --dataset toyhom --seeds 1 --keep-recorded-seeds
    python -m benchmarks.bench_transfer --dataset kuake_qtr --seeds 0 1 2 --query-speedup 5

``--query-speedup 5`` runs the same config with one more line, ``recipes.care.query_speedup: 5`` (the query tower
the budget picks, with its recipe: :mod:`care.train.recipes.budget_tower`), into ``<work>/<dataset>_speedup5/`` and records
``transfer/<dataset>_speedup5.json``, with ``extra.query_budget`` (each seed's pick and measured speed-ups) and
``extra.selection`` (the pick, ``selected_on: speed``; the recipe's settings and the split each was chosen on).

Every record's CARE / symmetric large is given as the ratio of means and per seed (each seed against its own
symmetric large: ``targets["CARE / symmetric large per seed"]``). The code is pinned when the script starts (a
dirty checkout is refused unless ``--allow-dirty``); each seed's commit is the one its ``care run`` manifest pinned.

``--keep-recorded-seeds`` adds the seeds run now to those the dataset's record already holds (a seed run again
replaces its recorded figures), so a CPU can run one seed per sitting, on a machine that kept no run folders.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
from typing import Any

from benchmarks._common import ROOT, RUNS, pin_code, portable, run_config_parser
from care.bench.record import BenchmarkRecord, write_record
from care.bench.selection import SELECTION_KEY, SPEED, Selection
from care.bench.tables import per_seed_ratios
from care.data.io import atomic_write
from care.pipeline.config import load_run_config
from care.pipeline.query_budget import OUTPUT_KEY as QUERY_BUDGET_KEY
from care.pipeline.run import run_pipeline
from care.pipeline.sources import VALIDATION_TASK

logger = logging.getLogger("bench_transfer")

EXPERIMENT = "transfer"
CONFIGS = {"toyhom": ROOT / "configs" / "runs" / "care_toyhom_e5.yaml",
           "kuake_qtr": ROOT / "configs" / "runs" / "care_kuake_qtr.yaml"}
#: Row labels (as the configs name them) the targets read.
E5, SYM_SMALL, SYM_LARGE, CARE = "e5 zero-shot", "symmetric small", "symmetric large", "CARE"
ROWS = (E5, SYM_SMALL, SYM_LARGE, CARE)
#: Issue 43's targets: CARE / symmetric large, CARE - symmetric small.
TARGET_RATIO, TARGET_MARGIN = 0.97, 0.02


def record_name(dataset: str, args: argparse.Namespace) -> str:
    """The record (and work folder) name: the dataset, ``_speedup<X>`` with ``--query-speedup X``."""
    speedup = getattr(args, "query_speedup", None)
    return dataset + (f"_speedup{speedup:g}" if speedup else "")


def config_overrides(args: argparse.Namespace) -> list[str]:
    """``--set`` and, with ``--query-speedup``, the budget's one line."""
    speedup = getattr(args, "query_speedup", None)
    return [*args.set, *([f"recipes.care.query_speedup={speedup:g}"] if speedup else [])]


def run_seed(args: argparse.Namespace, seed: int) -> dict[str, Any]:
    """One seed's ``care run``: its results, the validation checks and the wall times of steps and stages."""
    work = args.work / record_name(args.dataset, args)
    overrides = [f"seed={seed}", f"cache_dir={work / 'cache'}", "show_progress=false", *config_overrides(args)]
    report = run_pipeline(load_run_config(CONFIGS[args.dataset], overrides), work / f"seed{seed}",
                          allow_dirty=args.allow_dirty)
    results = json.loads((report.output / "results.json").read_text(encoding="utf-8"))
    manifest = json.loads((report.output / "manifest.json").read_text(encoding="utf-8"))
    stage_seconds = {}
    for stage_dir in sorted((report.output / "models" / "care").glob("*/train_result.json")):
        stage_seconds[stage_dir.parent.name] = json.loads(stage_dir.read_text(encoding="utf-8")).get("train_seconds")
    return {"main_task": results["main_task"], "rows": results["rows"], "index": results.get("index"),
            "validation": manifest["steps"]["train_care"]["outputs"].get("validation", {}),
            "query_budget": manifest["steps"]["train_care"]["outputs"].get(QUERY_BUDGET_KEY),
            "step_seconds": {name: step.get("seconds") for name, step in manifest["steps"].items()},
            "stage_train_seconds": stage_seconds, "overrides": list(args.set),
            "commit": run_commit(manifest), "code": manifest.get("code", [])}


def run_commit(manifest: dict[str, Any]) -> str:
    """The commit a run's manifest pinned when it started (its last start's: the code that finished it), or
    ``"unknown"`` for a run folder older than the pin."""
    code = manifest.get("code") or []
    return code[-1]["commit"] if code else "unknown"


def recorded_runs(record: BenchmarkRecord, dataset: str) -> dict[int, dict[str, Any]]:
    """The per-seed runs a record of :func:`summarise` holds, rebuilt as :func:`run_seed` returns them (each row's
    main-task and validation nDCG@10 from ``scores``; the rest from ``extra.per_seed``; a seed recorded before
    seeds carried their overrides and commit takes the record's); ``{}`` for a record of another run config."""
    if record.config.get("run_config") != str(CONFIGS[dataset].relative_to(ROOT)):
        return {}
    runs: dict[int, dict[str, Any]] = {}
    for key, run in record.extra.get("per_seed", {}).items():
        seed = int(key)
        rows = []
        for label, entry in record.scores.items():
            if label.endswith(" (validation)") or seed not in entry["seeds"]:
                continue
            row_scores = {run["main_task"]: entry["per_seed"][entry["seeds"].index(seed)]}
            val = record.scores.get(f"{label} (validation)")
            if val and seed in val["seeds"]:
                row_scores[VALIDATION_TASK] = val["per_seed"][val["seeds"].index(seed)]
            rows.append({"model": label, "scores": row_scores})
        runs[seed] = {"overrides": list(record.config.get("overrides", [])), "commit": record.commit, **run, "rows": rows}
    return runs


def without_stored_prompts(args: argparse.Namespace, seed: int) -> BenchmarkRecord:
    """What the e5-trained rows score when queried as ``care run`` queried them before folders carried their
    prefixes (:mod:`care.encoders.stored_prompts`): each row's folder, linked without ``care_prompts.json`` and
    scored with no spec options — CARE's routed folder then applies the CMedTEB instruction to queries, the plain
    towers no prefix at all — beside the same folder as trained. Record ``<dataset>_without_stored_prompts``."""
    from care.bench.options import RunOptions
    from care.bench.runner import evaluate
    from care.encoders.cache import EmbeddingCache
    from care.encoders.registry import load_model
    from care.encoders.stored_prompts import PROMPTS_FILE
    from care.pipeline.context import RunContext
    from care.pipeline.sources import main_task

    run = args.work / args.dataset / f"seed{seed}"
    config = load_run_config(CONFIGS[args.dataset], [f"seed={seed}", *args.set])
    task = main_task(RunContext(config, run))
    folders = {SYM_LARGE: run / "models" / "care" / "init_document" / "document",
               CARE: run / "models" / "care" / "stage2" / "model"}
    options = RunOptions(cache=EmbeddingCache(args.work / args.dataset / "cache" / "embeddings"), show_progress=False)
    scores = {}
    for row, folder in folders.items():
        bare = args.work / args.dataset / "without_stored_prompts" / f"seed{seed}" / row.replace(" ", "_")
        bare.mkdir(parents=True, exist_ok=True)
        for item in folder.iterdir():
            if item.name != PROMPTS_FILE and not (bare / item.name).exists():
                (bare / item.name).symlink_to(item.resolve())
        scores[row] = {"as trained": evaluate(load_model(str(folder)), task, options).scores["ndcg_at_10"],
                       "without stored prompts": evaluate(load_model(str(bare)), task, options).scores["ndcg_at_10"]}
    return BenchmarkRecord(EXPERIMENT, f"{args.dataset}_without_stored_prompts",
                           config={"run_config": str(CONFIGS[args.dataset].relative_to(ROOT)), "overrides": args.set},
                           seeds=[seed], scores=scores, latencies={})


def budget_selection(runs: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """The query-latency budget's pick (``recipes.care.query_speedup``) in the selection protocol's block, per seed
    run: chosen by measured speed-ups, no quality score (``selected_on: speed``)."""
    out = []
    for seed, run in sorted(runs.items()):
        choice = run.get("query_budget")
        if choice:
            out.append(Selection(f"query tower depth (seed {seed})", SPEED, str(choice["depth"]),
                                 {str(d): v for d, v in choice["speedups"].items()},
                                 metric=f"speed-up over the document model's query side ({choice['engine']})",
                                 record=f"care run manifest, seed {seed} (steps.train_care.outputs.query_budget)",
                                 note=f"the deepest cut at least {choice['budget']:g}x faster").to_dict())
    return out


def summarise(dataset: str, runs: dict[int, dict[str, Any]], args: argparse.Namespace,
              selections: list[dict[str, Any]] | None = None) -> BenchmarkRecord:
    """Per row: nDCG@10 per seed, mean and std on the main task and on validation; the targets, CARE's ratio to
    symmetric large per seed beside the ratio of means; the selection protocol's block (``selections`` of how the
    preset's settings were chosen, kept from the record this one replaces, then the budget's pick)."""
    seeds = sorted(runs)
    scores: dict[str, Any] = {}
    for row in (r["model"] for r in runs[seeds[0]]["rows"]):
        for task, suffix in ((None, ""), (VALIDATION_TASK, " (validation)")):
            values, scored = [], []
            for seed in seeds:
                found = next((r for r in runs[seed]["rows"] if r["model"] == row), None)
                name = task or runs[seed]["main_task"]
                if found and name in found["scores"]:
                    values.append(found["scores"][name])
                    scored.append(seed)
            if values:
                scores[row + suffix] = {"per_seed": values, "seeds": scored,
                                        "mean": statistics.mean(values),
                                        "std": statistics.stdev(values) if len(values) > 1 else 0.0}
    mean = {row: scores[row]["mean"] for row in ROWS if row in scores}
    targets = {}
    if {CARE, SYM_LARGE, SYM_SMALL, E5} <= set(mean):
        targets = {"CARE / symmetric large": mean[CARE] / mean[SYM_LARGE],
                   "CARE / symmetric large per seed": {str(seed): ratio for seed, ratio in
                                                       per_seed_ratios(scores[CARE], scores[SYM_LARGE]).items()},
                   f"CARE >= {TARGET_RATIO:.0%} of symmetric large": mean[CARE] >= TARGET_RATIO * mean[SYM_LARGE],
                   "CARE - symmetric small": mean[CARE] - mean[SYM_SMALL],
                   f"CARE >= symmetric small + {TARGET_MARGIN}": mean[CARE] >= mean[SYM_SMALL] + TARGET_MARGIN,
                   "CARE - e5 zero-shot": mean[CARE] - mean[E5], "CARE >= e5 zero-shot": mean[CARE] >= mean[E5]}
    config = portable(load_run_config(CONFIGS[dataset], config_overrides(args)).to_dict())
    extra = {"targets": targets, "per_seed": portable({seed: {k: v for k, v in run.items() if k != "rows"}
                                                       for seed, run in runs.items()})}
    budget = {str(seed): run["query_budget"] for seed, run in runs.items() if run.get("query_budget")}
    if budget:
        extra[QUERY_BUDGET_KEY] = budget
    kept = [s for s in selections or [] if s.get("selected_on") != SPEED]  # the budget's picks are made anew
    if kept or budget:
        extra[SELECTION_KEY] = [*kept, *budget_selection(runs)]
    return BenchmarkRecord(EXPERIMENT, record_name(dataset, args),
                           config={"run_config": str(CONFIGS[dataset].relative_to(ROOT)),
                                   "overrides": config_overrides(args), "resolved": config},
                           seeds=seeds, scores=scores, latencies={}, extra=extra)


def _target(value: Any) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, dict):  # per seed
        return ", ".join(f"{v:.4f} (seed {k})" for k, v in value.items()) or "–"
    return f"{value:.4f}"


def to_markdown(record: BenchmarkRecord) -> str:
    lines = [f"# Transfer — {record.name}: nDCG@10 over seeds {record.seeds} (`care run`, real weights)", "",
             "| row | test mean | std | per seed | validation mean |", "|---|---|---|---|---|"]
    for row, r in record.scores.items():
        if row.endswith(" (validation)"):
            continue
        val = record.scores.get(f"{row} (validation)")
        lines.append(f"| {row} | {r['mean']:.4f} | {r['std']:.4f} | {', '.join(f'{x:.4f}' for x in r['per_seed'])} | "
                     + (f"{val['mean']:.4f} |" if val else "– |"))
    lines += ["", "| target (issue 43) | value |", "|---|---|"]
    lines += [f"| {k} | {_target(v)} |" for k, v in record.extra["targets"].items()]
    lines += ["", f"Config: `{record.config['run_config']}` {' '.join(record.config['overrides'])}. Command: "
                  f"`{record.command}`; commit {record.commit}."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = run_config_parser(__doc__.split("\n")[0], list(CONFIGS), RUNS / "bench_transfer")
    parser.add_argument("--without-stored-prompts", action="store_true",
                        help="score the first seed's finished CARE and symmetric large rows also as care run did before "
                             "model folders carried their prefixes (record <dataset>_without_stored_prompts)")
    parser.add_argument("--query-speedup", type=float, default=None, metavar="X",
                        help="add recipes.care.query_speedup=X to the config (record <dataset>_speedup<X>)")
    parser.add_argument("--keep-recorded-seeds", action="store_true",
                        help="add the seeds run now to those the dataset's record holds (a seed run again is replaced)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    pin_code(args.results, args)  # the code that trains, not the checkout's when the record is written
    if args.without_stored_prompts:
        path = write_record(without_stored_prompts(args, args.seeds[0]), args.results)
        logger.info("%s: %s", path, json.loads(path.read_text(encoding="utf-8"))["scores"])
        return
    runs: dict[int, dict[str, Any]] = {}
    previous = args.results / EXPERIMENT / f"{record_name(args.dataset, args)}.json"
    before = (BenchmarkRecord.from_dict(json.loads(previous.read_text(encoding="utf-8")), str(previous))
              if previous.exists() else None)
    if args.keep_recorded_seeds and before is not None:
        runs = recorded_runs(before, args.dataset)
        logger.info("%s: keeping recorded seeds %s", previous, sorted(set(runs) - set(args.seeds)))
    runs.update({seed: run_seed(args, seed) for seed in args.seeds})
    record = summarise(args.dataset, runs, args, before.extra.get(SELECTION_KEY) if before else None)
    path = write_record(record, args.results)
    with atomic_write(path.with_suffix(".md")) as fh:
        fh.write(to_markdown(record))
    logger.info("%s\n%s", path, to_markdown(record))


if __name__ == "__main__":
    main()
