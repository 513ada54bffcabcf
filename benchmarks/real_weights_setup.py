"""What the real-weight scripts share (``bench_real_weights``, its summary and diagnosis, ``bench_stage1_probe``):
e5's conventions, the dev set's prepared split (training rows, Stage I alignment data, the scored task), e5 cuts,
and the scorer (the safety net's :class:`care.train.recipes.validation.StageValidator`: scores kept by model fingerprint).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import quote

from benchmarks._common import ROOT
from care.data.io import iter_jsonl, write_jsonl
from care.models.e5_export import PASSAGE_PREFIX, QUERY_PREFIX
from care.train.engine.trainer import read_result
from care.train.recipes.presets import preset_dir
from care.train.recipes.st_mnrl import StMnrlConfig
from care.train.recipes.validation import StageValidator, ValidationConfig

CONFIGS = preset_dir("e5")  # what care train recipe / care run use for e5 document towers
DEMO_RETRIEVAL = ROOT / "src" / "care" / "demo" / "data" / "CMedTEB-Demo-Retrieval"
EXPERIMENT = "real_weights"
E5_OPTIONS = f"query_prefix={quote(QUERY_PREFIX)}&document_prefix={quote(PASSAGE_PREFIX)}&instructions=false"
#: The query tower's depth (``--layers``): e5 cut to 6 strided layers, as the table's CARE row.
QUERY_LAYERS = 6
#: Token budget of both towers in training (set by --max-length; the e5 preset says 192).
LENGTH_OVERRIDES: list[str] = []
#: Validation hold-out (care.data.splits, whole answer groups): share of the training rows, fixed seed.
VALIDATION_SHARE, VALIDATION_SEED = 0.1, 20261125
#: Short answer sentences added to Stage I's query-side alignment texts (care.train.recipes.alignment_data; no document-side
#: rows: the e5 student did as well without them, benchmarks/results/e5_student ..._sent10000_nodoc).
ALIGNMENT_SENTENCES = 10000
#: Where bench_stage1_probe.py trains its probes inside a seed's folder.
PROBE_FOLDER = "stage1_probe"
#: Cosine at which two e5 passage vectors count as the same answer (--diagnose: in-batch copies masked).
DUPLICATE_THRESHOLD = 0.98
#: The peer's settings (``care train baseline st-mnrl``'s shipped config: issue 15's 1 epoch, batch 32, lr 2e-5).
PEER_CONFIG = ROOT / "configs" / "baselines" / "st_mnrl" / "train.yaml"
PEER_ROW = "peer (sentence-transformers trainer)"


def peer_config(max_length: int | None = None) -> StMnrlConfig:
    """The peer's settings: the shipped st-mnrl config, with ``--max-length``."""
    config = StMnrlConfig.load(PEER_CONFIG)
    return replace(config, max_length=max_length) if max_length else config


#: The peer's settings as the records name them.
PEER = {k: getattr(peer_config(), f) for k, f in (("epochs", "epochs"), ("batch_size", "batch_size"), ("lr", "lr"),
                                                  ("warmup", "warmup_ratio"), ("scale", "scale"),
                                                  ("max_length", "max_length"))}


@dataclass
class Prepared:
    """What the runs of one split need: training, alignment and corpus files, the scored task folder and split."""

    name: str
    train_file: Path
    alignment_file: Path
    corpus_file: Path
    task_dir: Path
    split: str | None = None


def e5_spec(path: Path | str, dtype: str | None) -> str:
    return f"{path}?pooling=mean&{E5_OPTIONS}" + (f"&dtype={dtype}" if dtype else "")


def finished(folder: Path) -> bool:
    """A training stage in ``folder`` completed (its ``train_result.json`` says so)."""
    result = read_result(folder)
    return result is not None and result.completed


def prepare(data: Path, work: Path, validation: bool, e5: str, max_train: int | None,
            dense_miner: bool = False) -> Prepared:
    """Training rows ({query, pos}), the scored task (test split, or the held-out validation queries) and Stage I
    alignment data (training queries + answer sentences, one negative each, mined by BM25 — or by e5 with
    ``dense_miner``, where jieba is not installed)."""
    from care.data.retrieval import load_corpus
    from care.data.splits import hold_out_by_positive, write_validation_task
    from care.encoders.registry import load_model
    from care.train.recipes.alignment_data import DenseNegativeMiner, build_alignment_data, document_sentences

    folder = work / ("validation" if validation else "test")
    folder.mkdir(parents=True, exist_ok=True)
    rows = [{"query": r["query"], "pos": [r["positive"]]} for _, r in iter_jsonl(data / "train.jsonl")]
    task_dir, split = data, "test"
    if validation:
        rows, held = hold_out_by_positive(rows, VALIDATION_SHARE, VALIDATION_SEED)
        task_dir, split = write_validation_task(held, data / "corpus.jsonl", folder / "task"), None
    rows = rows[:max_train] if max_train else rows
    if not (folder / "train.jsonl").is_file():
        write_jsonl(folder / "train.jsonl", rows)
    if not (folder / "alignment.jsonl").is_file():
        documents = [d.text for d in load_corpus(data / "corpus.jsonl").values()]
        queries = [r["query"] for r in rows] + document_sentences(documents, limit=max_train or ALIGNMENT_SENTENCES,
                                                                  seed=0)
        miner = DenseNegativeMiner(load_model(e5), batch_size=256) if dense_miner else None
        write_jsonl(folder / "alignment.jsonl", build_alignment_data(queries, [], negative_miner=miner, seed=0))
    return Prepared(folder.name, folder / "train.jsonl", folder / "alignment.jsonl", data / "corpus.jsonl",
                    Path(task_dir), split)


def score_rows(specs: dict[str, str], prep: Prepared, folder: Path, cache_dir: Path,
               task_dir: Path | None = None) -> dict[str, dict]:
    """nDCG@10 and Recall@100 of every row on ``prep``'s task (or ``task_dir``), kept in ``folder/scores.json`` by
    model fingerprint (the safety net's scorer), vectors in the embedding cache ``cache_dir``."""
    validator = StageValidator(task_dir or prep.task_dir, folder, ValidationConfig(), cache_dir=cache_dir,
                               split=None if task_dir else prep.split)
    return {row: dict(validator.score(row, spec).scores) for row, spec in specs.items()}


def e5_cuts(e5: Path, layers: int, work: Path) -> Path:
    """e5 cut to ``layers`` strided layers (care model prune --keep strided), once."""
    from care.models.prune import prune_layers

    out = work / f"e5-L{layers}-strided"
    if not out.is_dir():
        prune_layers(e5, layers, out, keep="strided")
    return out


def e5_narrow(e5: Path, layers: int, width: int, work: Path, texts_file: Path | None = None) -> Path:
    """e5 cut to ``layers`` strided layers with every feed-forward block narrowed to ``width`` neurons (care model
    prune --ffn-width), the neurons ranked on the queries of ``texts_file`` (weights only without it), once."""
    out = work / f"e5-L{layers}-strided-ffn{width}{'-queries' if texts_file else ''}"
    return narrowed(e5_cuts(e5, layers, work), width, out, texts_file) if not out.is_dir() else out


def narrowed(model: Path, width: int, out: Path, texts_file: Path | None = None) -> Path:
    """``model`` with every feed-forward block narrowed to ``width`` neurons (care model prune --ffn-width), written
    to ``out`` once; the neurons ranked on the queries of the training file ``texts_file`` (by weights only
    without it: enough where only the shape matters, as for timing)."""
    from care.models.ffn_prune import prune_ffn

    if not out.is_dir():
        prune_ffn(model, width, out, texts=[r["query"] for _, r in iter_jsonl(texts_file)] if texts_file else [])
    return out


def ensure_e5(args) -> Path:
    """The exported e5 folder (``--e5``), written with ``care model export-e5`` when missing."""
    if (args.e5 / "config.json").is_file():
        return args.e5
    from care.models.e5_export import export_e5

    return export_e5(args.e5)


def model_spec(folder: str | Path) -> str:
    """A trained e5 folder encoded as trained: e5's prefixes, no task instructions, float32."""
    return f"{folder}?{E5_OPTIONS}&dtype=float32"
