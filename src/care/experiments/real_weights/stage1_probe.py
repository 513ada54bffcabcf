"""Stage I probes: which Stage I setting moves CARE's query tower on real weights (issue 15).

Each probe is one Stage I run (the e5 preset's ``stage1.yaml`` plus the probe's settings) from a finished
``bench_real_weights`` seed: the query tower starts from that seed's ``init_query`` (``start=cut``: the fine-tuned
document tower cut to the query depth; ``start=stage1``: that seed's finished Stage I query tower, more epochs on top;
``ffn=W`` also narrows the starting tower's feed-forward blocks to W neurons) and aligns to the seed's frozen,
fine-tuned ``init_document`` tower. A probe is scored two ways: nDCG@10 of its Stage I CARE model, and the mean
cosine between its and the document tower's *query* vectors of the first scored queries. The record also scores the
frozen document tower on both sides (:data:`REFERENCE`).

Probes choose settings, so they score the **validation** split; the record keeps the choice in the selection
protocol (:func:`probe_selection`); ``--split test`` is refused unless ``--select-on-test`` (then marked). A probe
folder refuses to be rerun under the same name with other settings; finished probes are skipped.

:func:`build_parser` is ``python -m benchmarks.bench_stage1_probe``'s command line, :func:`run` what it does.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
from pathlib import Path

from care.bench.locations import RESULTS, RUNS, dev_set, portable
from care.bench.record import ALLOW_DIRTY_FLAG, BenchmarkRecord, pin_commit, write_record
from care.bench.selection import SELECT_ON_TEST_FLAG, TEST, TEST_FOOTNOTE, VALIDATION, Selection, selection_split
from care.data.io import atomic_write, iter_jsonl
from care.experiments.real_weights import EXPERIMENT
from care.experiments.real_weights.split import PROBE_FOLDER, finished, prepare, score_rows
from care.experiments.real_weights.towers import (
    CONFIGS,
    QUERY_LAYERS,
    e5_spec,
    length_settings,
    model_spec,
    narrowed,
    setting_texts,
)
from care.models.e5_export import QUERY_PREFIX
from care.train.engine.config import TrainConfig, load_config
from care.train.engine.trainer import read_result, train
from care.train.recipes.recipe import record_run_settings
from care.train.stage_settings import StageSetting, apply_settings, parse_settings

logger = logging.getLogger("bench_stage1_probe")

#: Settings every probe shares unless it overrides them: a quarter of the preset's Stage I.
PROBE_DEFAULTS = (StageSetting("optim.epochs", 1),)
#: Scored queries (of the probed split) whose query-vector cosine to the document tower is reported.
COSINE_QUERIES = 400
#: The row of the seed's frozen document tower on both sides: the probes' reference.
REFERENCE = "symmetric large (the document tower, both sides)"
#: ``start=`` values: the seed's init_query tower, the fine-tuned document tower cut to the query depth,
#: or the seed's finished Stage I query tower (a probe of more Stage I epochs).
STARTS = ("init_query", "cut", "stage1")
#: A probe's own items (not stage settings): where its query tower starts, its feed-forward width.
START_ITEM, FFN_ITEM = "start=", "ffn="
#: Batch of the query vectors the cosine is taken on.
COSINE_BATCH = 64
#: The name the split check gives (the command line's flag).
WHERE = "bench_stage1_probe --split"


def parse_probe(text: str) -> tuple[str, list[str]]:
    """``NAME=KEY=VALUE;KEY=VALUE`` -> ``(NAME, [KEY=VALUE, ...])``; ``NAME=`` is the preset unchanged."""
    name, _, rest = text.partition("=")
    if not name:
        raise argparse.ArgumentTypeError(f"--probe {text!r}: expected NAME=KEY=VALUE;... (NAME= for the preset)")
    return name, [item for item in rest.split(";") if item]


def query_vectors(tower: Path, queries: list[str]):
    """The tower's normalised vectors of ``query: `` + each query (numpy, one row per query)."""
    from sentence_transformers import SentenceTransformer

    texts = [QUERY_PREFIX + q for q in queries]
    return SentenceTransformer(str(tower), device="cpu").encode(texts, normalize_embeddings=True,
                                                                batch_size=COSINE_BATCH)


def mean_pairwise_cosine(vectors) -> float:
    """Mean cosine between two *different* rows: how much of every vector is one shared direction
    (e5's vectors are anisotropic: unrelated queries score far above 0)."""
    n = len(vectors)
    total = float((vectors.sum(axis=0) ** 2).sum())  # sum over all pairs i, j of <v_i, v_j>, diagonal included
    return (total - n) / (n * (n - 1))


def run_probe(name: str, settings: list[str], recipe: Path, work: Path, alignment: Path,
              length: tuple[StageSetting, ...], layers: int, seed: int, queries_file: Path) -> tuple[Path, float | None]:
    """Train one probe (skipped when finished with the same settings; refused when its folder holds
    other settings); returns its folder and its recorded training wall time."""
    from care.models.prune import prune_layers

    folder = work / name.replace(" ", "_")
    document = recipe / "init_document" / "document"
    start = next((s.split("=", 1)[1] for s in settings if s.startswith(START_ITEM)), "init_query")
    if start not in STARTS:
        raise SystemExit(f"--probe {name}: start={start!r}; choose from {', '.join(STARTS)}")
    width = next((s.split("=", 1)[1] for s in settings if s.startswith(FFN_ITEM)), None)
    if width is not None and not (width.isdigit() and int(width) > 0):
        raise SystemExit(f"--probe {name}: ffn={width!r}; give the feed-forward width as a positive whole number")
    overrides = parse_settings([s for s in settings if not s.startswith((START_ITEM, FFN_ITEM))],
                               source=f"--probe {name}")
    query = recipe / start / "query"
    if start == "stage1" and not finished(recipe / "stage1"):
        raise SystemExit(f"--probe {name}: start=stage1 needs {recipe / 'stage1'} finished (bench_real_weights.py)")
    if start == "cut":
        query = work / f"document-L{layers}-strided"
        if not query.is_dir():
            prune_layers(document, layers, query, keep="strided")
    if width is not None:
        query = narrowed(query, int(width), work / f"{start}-L{layers}-ffn{width}", queries_file)
    record_run_settings(folder / "probe.json", {"settings": settings, "length": setting_texts(length), "seed": seed,
                                                "layers": layers, "defaults": setting_texts(PROBE_DEFAULTS)},
                        "Stage I probe", "give the probe another name")
    if not finished(folder):
        _train_probe(folder, recipe, (StageSetting("model.query_model", str(query)),
                                      StageSetting("model.document_model", str(document)),
                                      StageSetting("data.train_file", str(alignment)), StageSetting("seed", seed),
                                      *length, *PROBE_DEFAULTS, *overrides))
    return folder, read_result(folder).train_seconds


def _train_probe(folder: Path, recipe: Path, settings: tuple[StageSetting, ...]) -> None:
    """The preset's Stage I with ``settings`` into ``folder``, the seed's teacher cache copied in (resumes)."""
    cache = recipe / "stage1" / "teacher_cache"  # the same frozen tower's targets: computed once per seed
    if cache.is_dir() and not (folder / "teacher_cache").exists():
        shutil.copytree(cache, folder / "teacher_cache")
    data = apply_settings(load_config(CONFIGS / "stage1.yaml").to_dict(),
                          [StageSetting("runtime.progress_bar", False), StageSetting("output_dir", str(folder)),
                           *settings])
    train(TrainConfig.from_dict(data), resume=True)


def probe_selection(scores: dict[str, dict], split: str) -> Selection:
    """The probes' choice in the selection protocol: every probe's nDCG@10 on ``split``, the best (a tie: the probe
    given first)."""
    candidates = {name: row["ndcg_at_10"] for name, row in scores.items()}
    return Selection("Stage I probe", split, max(candidates, key=lambda n: candidates[n]), candidates,
                     metric="ndcg_at_10", rows=list(candidates))


def build_parser(description: str = "Stage I probes on a finished real-weights seed") -> argparse.ArgumentParser:
    """``bench_stage1_probe``'s command line."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data", type=Path, default=None, help="the dev set's folder (default: $CARE_DEV_SET)")
    parser.add_argument("--e5", type=Path, default=RUNS / "e5" / "L12")
    parser.add_argument("--work", type=Path, default=RUNS / "real_weights",
                        help="bench_real_weights.py's --work (the seed's recipe must have finished init_document)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--layers", type=int, default=QUERY_LAYERS)
    parser.add_argument("--max-length", type=int, default=None)
    parser.add_argument("--probe", action="append", type=parse_probe, required=True, metavar="NAME=KEY=VALUE;...",
                        help="a Stage I setting to probe (repeatable); start=cut starts from the cut document tower, "
                             "start=stage1 from the seed's finished Stage I query tower")
    parser.add_argument("--split", choices=(VALIDATION, TEST), default=VALIDATION,
                        help="the split the probes are scored on (test only with --select-on-test)")
    parser.add_argument(SELECT_ON_TEST_FLAG, action="store_true",
                        help="allow --split test: the record and its table then mark the choice as made on test")
    parser.add_argument("--tag", default="", help="name the record stage1_probe_<split>_<tag>_seed<K> (keeps other "
                                                   "probe records)")
    parser.add_argument(ALLOW_DIRTY_FLAG, action="store_true",
                        help="run from a checkout with uncommitted changes (the records keep the diff's SHA-256)")
    return parser


def run(args: argparse.Namespace) -> dict[str, dict]:
    """Train and score every ``--probe`` of ``args`` (the split checked before anything loads, the code pinned),
    write the record ``real_weights/stage1_probe_<split>[_<tag>]_seed<K>`` and its table; returns the probes'
    scores.

    Raises:
        CareError: ``--split test`` without ``--select-on-test``.
        SystemExit: the seed's ``init_document`` is not finished, or a probe's item is wrong (named).
    """
    split = selection_split(args.split, select_on_test=args.select_on_test, where=WHERE)
    args.data = args.data or dev_set()
    pin_commit(args.out, allow_dirty=args.allow_dirty, where="bench_stage1_probe")  # the code that trains
    prep = prepare(args.data, args.work, split == VALIDATION, e5_spec(args.e5, "float32"), None)
    seed_dir = args.work / prep.name / f"seed{args.seed}"
    recipe = seed_dir / "care" / "recipe"
    if not finished(recipe / "init_document"):
        flag = " --validation" if split == VALIDATION else ""
        raise SystemExit(f"{recipe / 'init_document'} is not finished: run "
                         f"python -m benchmarks.bench_real_weights{flag} --seeds {args.seed} first")
    length = length_settings(args.max_length)
    queries_file = prep.task_dir / "queries.jsonl" if split == VALIDATION else args.data / "test_queries.jsonl"
    queries = [r["text"] for _, r in iter_jsonl(queries_file)][:COSINE_QUERIES]
    target = query_vectors(recipe / "init_document" / "document", queries)
    scores, seconds = {}, {}
    for name, settings in args.probe:
        folder, seconds[name] = run_probe(name, settings, recipe, seed_dir / PROBE_FOLDER, prep.alignment_file,
                                          length, args.layers, args.seed, prep.train_file)
        row = score_rows({name: model_spec(folder / "model")}, prep, seed_dir / PROBE_FOLDER,
                         args.work / "embedding_cache")[name]
        row["query_cosine_to_document_tower"] = float((query_vectors(folder / "query", queries) * target).sum(axis=1).mean())
        scores[name] = row
        logger.info("probe %s %s: nDCG@10 %.4f, cosine %.4f", name, settings, row["ndcg_at_10"],
                    row["query_cosine_to_document_tower"])
    reference = score_rows({REFERENCE: model_spec(recipe / "init_document" / "document")}, prep,
                           seed_dir / PROBE_FOLDER, args.work / "embedding_cache")[REFERENCE]
    key = f"stage1_probe_{prep.name}{'_' + args.tag if args.tag else ''}_seed{args.seed}"
    record = BenchmarkRecord(EXPERIMENT, key, config={"probes": dict(args.probe),
                                                      "defaults": setting_texts(PROBE_DEFAULTS),
                                                      "length_overrides": setting_texts(length), "layers": args.layers,
                                                      "cosine_queries": COSINE_QUERIES, "split": split,
                                                      "stage1": portable(CONFIGS / "stage1.yaml")},
                             seeds=[args.seed], scores={**scores, REFERENCE: reference},
                             extra={"train_seconds": seconds,  # the trainer's, summed over resumes
                                    "document_tower_mean_pairwise_query_cosine": mean_pairwise_cosine(target),
                                    "selection": [probe_selection(scores, split).to_dict()]})
    write_record(record, args.out)
    with atomic_write(args.out / EXPERIMENT / f"{key}.md") as fh:
        fh.write(probe_markdown(record, args.probe, prep.name))
    return scores


def probe_markdown(record: BenchmarkRecord, probes: list[tuple[str, list[str]]], split_name: str) -> str:
    """The probe record as the table beside it: each probe's settings, nDCG@10, share of the reference, cosine."""
    scores, reference = record.scores, record.scores[REFERENCE]
    lines = [f"# Stage I probes — dev set, {split_name} split, seed {record.seeds[0]}, {record.config['layers']}-layer "
             f"query tower ({' '.join(record.config['defaults'])} unless set)", "",
             "| probe | settings | nDCG@10 (Stage I model) | of symmetric large | query cosine to the document tower |",
             "|---|---|---|---|---|"]
    lines += [f"| {name} | {'; '.join(settings) or 'preset'} | {scores[name]['ndcg_at_10']:.4f} | "
              f"{scores[name]['ndcg_at_10'] / reference['ndcg_at_10']:.1%} | "
              f"{scores[name]['query_cosine_to_document_tower']:.4f} |" for name, settings in probes]
    if record.config["split"] == TEST:
        lines += ["", TEST_FOOTNOTE.replace("this row", "these probes")]
    lines += ["", f"{REFERENCE}: nDCG@10 {reference['ndcg_at_10']:.4f} (the seed's fine-tuned 12-layer tower every probe "
              "aligns to, on both sides)."]
    lines += ["", f"Two *different* test queries' vectors from the document tower have mean cosine "
              f"{record.extra['document_tower_mean_pairwise_query_cosine']:.3f}: a cosine near 1 between the cut's and "
              "the tower's vector of the same query can still leave the small differences that rank documents wrong."]
    return "\n".join(lines) + "\n"


def print_scores(scores: dict[str, dict]) -> None:
    """The probes' scores as the script reports them (JSON)."""
    print(json.dumps(scores, indent=1))  # noqa: T201 - the script's report
