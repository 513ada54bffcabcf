"""A query-latency budget turned into CARE's query tower: the deepest cut of the document model that is at least
that much faster than the document model's own query side, and the Stage I settings that depth trains with.

The curve is measured on this machine (:func:`care.bench.depth_latency.measure_depth_latency`: the document
model cut to each depth, timed side by side at batch 1 on one thread); :func:`pick_depth` is the rule, a pure
function of it; :func:`choose_query_tower` measures and picks. A budget no cut meets fails before anything is
trained, with the measured speed-ups (:class:`QueryBudgetError`). Where the pick is one layer, the frontier's
richer Stage I applies, exactly as the frontier's 1-layer point trained it: the ``RICH_*`` table below, the one place
both paths read (``benchmarks/results/real_weights/test_cpu_rich_lr2.4e-3_L1_seed*.json``: ``bench_real_weights.py
--layers 1 --max-length 128 --variant rich-lr2.4e-3=...``, its Stage I data built by ``benchmarks/frontier_kit.py``,
which calls :func:`write_rich_alignment`). :func:`rich_stage1` gives its training settings,
:data:`RICH_DATA_FIELDS` its data as ``care run``'s recipe fields, :func:`rich_alignment_file` the same data as a
file. The pick is a selection by measured speed, not by a score: :meth:`QueryTowerChoice.selection` records it in the
selection protocol (:mod:`care.bench.selection`, ``selected_on: speed``). The settings themselves were chosen on the
first dev set's test split (seed 0): ``docs/results.md``, "How the settings were chosen".

Used by ``care run`` (``recipes.care.query_speedup``, :mod:`care.pipeline.query_budget`) and
``care train recipe --query-speedup``; both check the budget with :func:`budget_error`.

Example::

    choice = choose_query_tower("e5?layers=6", "runs/x/cache/towers/.../L12", 5.0, queries, "runs/x/cache/q_lat")
    choice.query_spec   # "e5?layers=1"  (the deepest cut >= 5x faster than e5's 12 layers, here)
    choice.describe()   # one line: the budget, the speed-ups per depth, the pick, the settings it trains with
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from care.errors import CareError
from care.train.recipes.plan import RecipePlan
from care.train.stage_settings import StageSetting, sets

logger = logging.getLogger(__name__)

#: The depth at which the frontier's richer Stage I applies: the only depth it was trained and measured at
#: (``benchmarks/results/frontier/test.md``: CARE 1 layer 0.237, CARE [rich] 1 layer 0.256 nDCG@10, about CARE
#: 3 layers' 0.256; the 3- and 6-layer towers were measured with the preset's Stage I only).
RICH_STAGE1_DEPTH = 1
#: The record of the measured recipe these settings reproduce (``<experiment>/<name>`` under ``benchmarks/results/``).
RICH_RECORD = "real_weights/test_cpu_rich_lr2.4e-3_L1"
#: Corpus sentences Stage I takes as query-side alignment texts: "every corpus sentence" of the frontier's CARE
#: [rich] (``benchmarks/frontier_kit.py`` took all; the dev set has 18,962 of 6-150 characters, so this cap, there
#: for corpora of millions, does not bind on it; the preset's real-weight runs: 10,000).
RICH_ALIGNMENT_SENTENCES = 100_000
#: The longest such sentence, in characters (every sentence of 6 to 150; the preset's: 6 to 60,
#: :data:`care.train.recipes.alignment_data.SENTENCE_MAX_CHARS`).
RICH_SENTENCE_MAX_CHARS = 150
#: Sentences are taken from each document's text alone, not its title (the kit's ``d.text``).
RICH_SENTENCE_TITLES = False
#: Query-side alignment rows only: the training file's positives are not aligned as document-side rows (the measured
#: runs' ``include_documents=False``; a passage costs the small query tower several short texts).
RICH_ALIGNMENT_DOCUMENTS = False
#: Both towers' token limit in every stage (the measured CPU seeds' ``--max-length 128``; the e5 preset's: 192).
RICH_MAX_LENGTH = 128
#: Stage I's alignment epochs in the richer Stage I (the e5 preset: 4).
RICH_STAGE1_EPOCHS = 6
#: Stage I's ranking part's epochs in the richer Stage I (the e5 preset: 2).
RICH_RANK_EPOCHS = 3
#: Stage I's (alignment part's) learning rate in the richer Stage I. The e5 preset's 2e-4 was chosen for the 6-layer
#: tower; the 1-layer tower's Stage I alone keeps 77.0 % of symmetric large at it and 93.8 % at 2.4e-3
#: (``benchmarks/results/real_weights/stage1_probe_test_L1_more_text_seed0.md``, seed 0's **test** split: pending
#: re-selection on validation); the whole richer recipe at it keeps 97.6 % over the CPU's seeds 0-2
#: (:data:`RICH_RECORD`), where at the preset's rate it kept 89.4 % on the H200's seed 0
#: (``benchmarks/results/real_weights/test_frontier_rich_seed0.json``).
RICH_STAGE1_LR = 2.4e-3
#: Token-limit keys every stage's config takes (each set to :data:`RICH_MAX_LENGTH`).
LENGTH_KEYS: tuple[str, ...] = ("model.query_max_seq_length", "model.document_max_seq_length")
#: The richer Stage I's training settings per stage (``{stage: {key: value}}``, ``None``: every stage), as stage
#: overrides set them (the data comes from the sentence settings above).
RICH_STAGE_SETTINGS: dict[str | None, dict[str, float | int]] = {
    None: {key: RICH_MAX_LENGTH for key in LENGTH_KEYS},
    "stage1": {"optim.epochs": RICH_STAGE1_EPOCHS, "optim.lr": RICH_STAGE1_LR},
    "stage1_rank": {"optim.epochs": RICH_RANK_EPOCHS}}
#: The richer Stage I's data as ``care run``'s ``recipes.care`` fields (each applied where the user left it ``null``).
RICH_DATA_FIELDS: dict[str, int | bool] = {"alignment_sentences": RICH_ALIGNMENT_SENTENCES,
                                           "alignment_sentence_max_chars": RICH_SENTENCE_MAX_CHARS,
                                           "alignment_sentence_titles": RICH_SENTENCE_TITLES,
                                           "alignment_documents": RICH_ALIGNMENT_DOCUMENTS}
#: How many of the run's queries are timed (distinct training queries, in file order): a few are enough, the
#: latency routine cycles through them until every median is stable.
LATENCY_QUERIES = 20
#: A query tower of an e5 document model is timed as the e5 preset encodes queries: mean pooling, ``query: ``,
#: no task instruction (as the frontier's latency, ``care.experiments.real_weights.latency``).
E5_QUERY_OPTIONS = "pooling=mean&query_prefix=query%3A+&instructions=false"


class QueryBudgetError(CareError):
    """No depth cut of the document model meets the query-latency budget, or the curve could not be measured
    reliably here (the message lists the measured speed-ups)."""


def budget_error(budget: float) -> str | None:
    """Why ``budget`` is no query-latency budget (``None``: it is one): a speed-up must be at least 1 (NaN is not)."""
    if budget >= 1:
        return None
    return (f"must be at least 1 (how many times faster than the document model's query side the query tower must "
            f"answer), got {budget}")


def format_speedups(speedups: Mapping[int, float]) -> str:
    """``12: 1.00×, 6: 1.77×, 1: 4.84×`` (deepest first)."""
    return ", ".join(f"{depth}: {speedups[depth]:.2f}×" for depth in sorted(speedups, reverse=True))


def pick_depth(speedups: Mapping[int, float], budget: float) -> int:
    """The deepest depth whose speed-up over the full depth is at least ``budget``.

    Args:
        speedups: depth -> the full depth's median latency over this depth's (1.0 at full depth).
        budget: the speed-up asked for (``recipes.care.query_speedup``).
    Raises:
        QueryBudgetError: no depth is that fast; the message lists every measured speed-up.
    """
    meeting = [depth for depth, speedup in speedups.items() if speedup >= budget]
    if not meeting:
        fastest = max(speedups, key=lambda d: speedups[d]) if speedups else None
        best = f"; the fastest, {fastest} layer(s), is {speedups[fastest]:.2f}×" if fastest is not None else ""
        raise QueryBudgetError(
            f"no query tower meets the query-latency budget of {budget:g}× (speed-up over the document model's "
            f"query side, measured here per depth: {format_speedups(speedups)}{best}); ask for at most that "
            "(recipes.care.query_speedup / --query-speedup), or name the query tower yourself")
    return max(meeting)


def budget_towers_error(query_spec: str, document_spec: str, *, query_name: str = "--query-model",
                        document_name: str = "--document-model") -> str | None:
    """Why a query-latency budget cannot pick a tower for these specs (``None``: it can): the query tower must be a
    tower spec (``e5?layers=6``) of the document model, which must be the whole e5 (``e5``). ``query_name`` /
    ``document_name``: what the message calls the two settings."""
    from care.models.tower_spec import parse_tower_spec

    query, document = parse_tower_spec(query_spec), parse_tower_spec(document_spec)
    if query is not None and document is not None and not document.is_cut:
        return None
    return (f"a query-latency budget picks the query tower among the depth cuts of the document model, so "
            f"{query_name} must be a tower spec of {document_name}: {query_name} e5?layers=6 with {document_name} e5 "
            f"(got {query_name} {query_spec!r}, {document_name} {document_spec!r}); set those, or drop the budget to "
            "train the towers as named")


@dataclass
class QueryTowerChoice:
    """What a budget picked, and from what.

    Attributes:
        budget: the speed-up asked for.
        depth: the picked depth; ``query_spec`` names that cut (``e5?layers=N``, the given spec's keep mode).
        layers: the document model's depth (speed-up 1.0).
        speedups: depth -> measured speed-up over the full depth; ``median_ms``: depth -> median latency.
        engine: how they were timed (:data:`care.bench.depth_latency.ENGINES`' words).
        self_check: the measurement's self-check sentence.
        rich_stage1: the pick is :data:`RICH_STAGE1_DEPTH`: the frontier's richer Stage I applies.
        settings: the recipe settings applied for the pick (``{field: value}``), filled in by the caller.
        kept: settings the caller left as the user set them (not overridden by the richer Stage I).
    """

    budget: float
    depth: int
    query_spec: str
    layers: int
    speedups: dict[int, float]
    median_ms: dict[int, float]
    engine: str
    self_check: str
    rich_stage1: bool
    settings: dict[str, Any] = field(default_factory=dict)
    kept: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"budget": self.budget, "depth": self.depth, "query_spec": self.query_spec, "layers": self.layers,
                "speedups": {str(d): round(v, 3) for d, v in sorted(self.speedups.items(), reverse=True)},
                "median_ms": {str(d): round(v, 4) for d, v in sorted(self.median_ms.items(), reverse=True)},
                "engine": self.engine, "self_check": self.self_check, "rich_stage1": self.rich_stage1,
                "settings": dict(self.settings), "kept": list(self.kept), "selection": [self.selection()]}

    def selection(self) -> dict[str, Any]:
        """The pick in the selection protocol's block: chosen by the measured speed-ups (``selected_on: speed``),
        every depth a candidate; the recipe's settings name the record they reproduce."""
        from care.bench.selection import SPEED, Selection

        note = (f"the deepest cut at least {self.budget:g}x faster ({self.engine}; {self.self_check})"
                + (f"; the richer Stage I of {RICH_RECORD}" if self.rich_stage1 else ""))
        return Selection("query tower depth", SPEED, str(self.depth),
                         {str(d): round(v, 3) for d, v in sorted(self.speedups.items(), reverse=True)},
                         metric="speed-up over the document model's query side", note=note).to_dict()

    def describe(self) -> str:
        """One line: the budget, the measured speed-ups, the pick and the settings applied."""
        settings = ", ".join(f"{k}: {v}" for k, v in self.settings.items()) or "none"
        kept = f" (left as set: {', '.join(self.kept)})" if self.kept else ""
        return (f"query-latency budget {self.budget:g}×: speed-ups over {self.layers} layers ({self.engine}): "
                f"{format_speedups(self.speedups)} -> query tower {self.query_spec} ({self.depth} layer(s), "
                f"{self.speedups[self.depth]:.2f}×); settings applied: {settings}{kept}")


#: The words :func:`rich_stage1` lists a setting left as the user set it by.
SETTING_WORDS = {"optim.epochs": "epochs", "optim.lr": "learning rate", "model.query_max_seq_length":
                 "query token limit", "model.document_max_seq_length": "document token limit"}


def setting_label(setting: StageSetting) -> str:
    """How a setting is named in a choice's ``settings`` and its log line: ``stage1:optim.lr`` / ``optim.lr``."""
    return f"{setting.stage}:{setting.key}" if setting.stage else setting.key


def rich_stage1(settings: Sequence[StageSetting], *, user_set: Sequence[str] = ()) -> tuple[list[StageSetting], list[str]]:
    """The richer Stage I's settings (:data:`RICH_STAGE_SETTINGS`: both towers' token limit in every stage, Stage I's
    epochs and learning rate, its ranking part's epochs) where the user left them unset — the budget's one rule,
    for ``care run`` and ``care train recipe --query-speedup`` alike:
    ``(settings to add, ["<stage> <setting>" left as the user set them])``.

    Args:
        settings: the user's stage settings (a token limit set for any stage counts as set: the rule does not mix
            limits across stages).
        user_set: keys the user set for every stage some other way (``optim.epochs`` for ``recipes.care.epochs``,
            ``optim.lr`` for ``recipes.care.lr``, the token limits for ``recipes.care.*_max_length``).
    """
    added: list[StageSetting] = []
    kept: list[str] = []
    for stage, values in RICH_STAGE_SETTINGS.items():
        for key, value in values.items():
            words = f"{stage or 'every stage'} {SETTING_WORDS.get(key, key)}"
            if key in user_set or sets(settings, key, stage):
                kept.append(words)
            else:
                added.append(StageSetting(key, value, stage))
    return added, kept


def cut_spec(query_spec: str, depth: int) -> str:
    """The tower spec of ``depth`` layers, cut as ``query_spec`` cuts (``e5?layers=6&keep=first``, 3 ->
    ``e5?layers=3&keep=first``)."""
    from care.models.tower_spec import DEFAULT_KEEP, parse_tower_spec

    tower = parse_tower_spec(query_spec)
    if tower is None:
        raise CareError(f"{query_spec!r} is not a tower spec (e5?layers=N)")
    base = query_spec.strip().partition("?")[0].strip()
    return f"{base}?layers={depth}" + (f"&keep={tower.keep}" if tower.keep != DEFAULT_KEEP else "")


def choose_query_tower(query_spec: str, document_folder: str | Path, budget: float, queries: Sequence[str],
                       cache_dir: str | Path, *, engine: str | None = None, **measure: Any) -> QueryTowerChoice:
    """Measure the document model's depth curve (cached in ``cache_dir``) and pick the query tower for ``budget``.

    Args:
        query_spec: the configured query tower spec (its keep mode is kept; its depth is what the budget replaces).
        document_folder: the document model's folder (``e5`` resolved:
            :func:`care.models.tower_spec.resolve_tower_spec`).
        budget: the speed-up over the document model's query side asked for.
        queries: a few of the run's queries to time.
        cache_dir: where the curve is kept.
        engine / measure: :func:`care.bench.depth_latency.measure_depth_latency`'s (``None``: ONNX int8 when
            installed; ``timing="back_to_back"`` times each cut over consecutive queries).
    Raises:
        QueryBudgetError: the measurement could not be trusted (its self-check failed), or no cut meets the budget.
    """
    from care.bench.depth_latency import measure_depth_latency

    curve = measure_depth_latency(document_folder, queries, cache_dir, engine=engine, options=E5_QUERY_OPTIONS,
                                  **measure)
    speedups = curve.speedups()
    if not curve.trusted:
        raise QueryBudgetError(
            f"the query latency per depth could not be measured reliably here ({curve.self_check}; speed-ups as "
            f"measured: {format_speedups(speedups)}); rerun on a quieter machine, or name the query tower yourself")
    depth = pick_depth(speedups, budget)
    return QueryTowerChoice(budget=budget, depth=depth, query_spec=cut_spec(query_spec, depth), layers=curve.layers,
                            speedups=speedups, median_ms=dict(curve.median_ms), engine=curve.engine_description,
                            self_check=curve.self_check, rich_stage1=depth == RICH_STAGE1_DEPTH)


#: ``care train recipe --query-speedup``'s richer Stage I data, in --output (built once).
RICH_ALIGNMENT_FILE = "alignment_rich.jsonl"


def write_rich_alignment(train_file: str | Path, corpus: str | Path, out: str | Path, *, seed: int = 0,
                         limit: int = RICH_ALIGNMENT_SENTENCES) -> tuple[int, int]:
    """Write the richer Stage I's data to ``out``: the training file's queries, then up to ``limit`` sentences of
    6 to :data:`RICH_SENTENCE_MAX_CHARS` characters of the corpus documents' text (:data:`RICH_SENTENCE_TITLES`),
    each with one negative (:func:`care.train.recipes.alignment_data.build_alignment_data`'s default miner), query-side rows only
    (:data:`RICH_ALIGNMENT_DOCUMENTS`). ``benchmarks/frontier_kit.py`` built the measured runs' file with it.

    Returns:
        ``(rows written, corpus sentences among them)``.
    """
    from care.train.recipes.alignment_data import alignment_from_training_file, corpus_sentences

    sentences = corpus_sentences(corpus, limit=limit, seed=seed, max_chars=RICH_SENTENCE_MAX_CHARS,
                                 titles=RICH_SENTENCE_TITLES)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    rows = alignment_from_training_file(train_file, out, seed=seed, extra_queries=sentences,
                                        include_documents=RICH_ALIGNMENT_DOCUMENTS)
    return rows, len(sentences)


def rich_alignment_file(train_file: str | Path, corpus: str | Path, out_dir: str | Path, *, seed: int = 0) -> Path:
    """``<out_dir>/alignment_rich.jsonl`` (:func:`write_rich_alignment`), built once."""
    target = Path(out_dir) / RICH_ALIGNMENT_FILE
    if not target.is_file():
        write_rich_alignment(train_file, corpus, target, seed=seed)
    return target


def training_queries(train_file: str | Path, limit: int = LATENCY_QUERIES) -> list[str]:
    """The first ``limit`` distinct queries of a training file (the texts a query tower will see)."""
    from care.data.training import iter_training_file

    seen: dict[str, None] = {}
    for example in iter_training_file(train_file):
        seen.setdefault(example.query)
        if len(seen) >= limit:
            break
    return list(seen)


def budget_plan(plan: RecipePlan, choice: QueryTowerChoice, query_model: str) -> RecipePlan:
    """``plan`` trained as ``choice`` says (``care train recipe --query-speedup``): its query tower ``query_model``
    (the picked cut, resolved to a folder) and, at :data:`RICH_STAGE1_DEPTH`, the richer Stage I — its settings
    (:func:`rich_stage1`) before the plan's own, and its data (:func:`rich_alignment_file`, from the plan's corpus)
    unless the plan names an alignment file. Fills ``choice.settings`` and ``choice.kept``."""
    choice.settings = {"--query-model": choice.query_spec}
    plan = plan.with_paths(query_model=query_model)
    if not choice.rich_stage1:
        return plan
    added, choice.kept = rich_stage1(plan.all_settings)
    choice.settings.update({setting_label(s): s.value for s in added})
    plan = plan.with_settings(*added, first=True)
    paths = plan.paths
    if paths.alignment_file is not None:
        choice.kept.append("--alignment")
    elif paths.corpus_file is None:
        choice.kept.append("Stage I data (no --corpus to take sentences from)")
    else:
        alignment = str(rich_alignment_file(paths.train_file, paths.corpus_file, paths.output_dir))
        choice.settings["--alignment"] = alignment
        plan = plan.with_paths(alignment_file=alignment)
    return plan
