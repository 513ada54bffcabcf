"""The paper's efficient-retrieval baselines, each a short sequence of resumable steps.

Every baseline starts from the same large document encoder E_d (``init_document``: LoRA + MRL
InfoNCE fine-tune of the LLM, or an already-trained tower with ``BaselinePaths.document_trained``),
which then stays frozen (a cached teacher, :mod:`care.train.engine.teacher`), and builds a cheap query side:

==============  =============================================================================
baseline        steps (sub-folders of the output folder)
==============  =============================================================================
kale            init_document → prune (first N layers of E_d) → align (``kale_align``: KL)
wang_lyu        init_document → prune → distill (``embed_distill``: MSE to E_d's query vector)
scalingnote     init_document → distill (small BERT, ``kale_align`` KL) → finetune (``stage1_sft``)
score_distill   init_document → distill (symmetric small BERT, ``score_distill``: KL + InfoNCE)
st-mnrl         one model fine-tuned on both sides by sentence-transformers' own trainer
                (``MultipleNegativesRankingLoss``, :mod:`care.train.recipes.st_mnrl`); not the paper's
==============  =============================================================================

Each training step reads ``<config_dir>/<step>.yaml`` (``configs/baselines/<name>/``) or built-in
defaults, gets its models / data / output folder wired here, then its settings (``key=value`` for
training step, ``<step>:key=value`` for one; the prune step takes only ``prune:layers=N``). A finished step
(``train_result.json``, or the pruned folder) is skipped on rerun and an interrupted one resumes from
its last checkpoint, as in :func:`care.train.recipes.recipe.run_recipe`. ``st-mnrl`` has one step, ``train``
(``configs/baselines/st_mnrl/train.yaml``, :class:`care.train.recipes.st_mnrl.StMnrlConfig`), trained into the output
folder itself (``<output>/model``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from care.config import Config, ConfigError, read_config_file
from care.errors import CareError
from care.train.engine.config import TrainConfig
from care.train.engine.trainer import TrainResult, read_result, train
from care.train.stage_settings import StageSetting, apply_settings

logger = logging.getLogger(__name__)

SETTINGS_FILE = "baseline.json"
PRUNE_STEP = "prune"
PRUNED_DIRNAME = "model"
#: What the prune step did (source, layers, keep), next to the pruned folder: a rerun with other settings is refused.
PRUNE_SETTINGS_FILE = "prune.json"
#: Layers kept by the prune step when no ``prune.yaml`` says otherwise (our choice, not the paper's:
#: set ``prune:layers=N``).
DEFAULT_PRUNE_LAYERS = 2


@dataclass(frozen=True)
class Step:
    """One step of a baseline.

    Attributes:
        name: sub-folder of the output folder and the config file name (``<name>.yaml``).
        stage: the :data:`care.train.engine.config.STAGES` stage it trains, or ``"prune"``.
        query: where its query model comes from: ``"pruned"`` (the prune step's folder),
            ``"small"`` (``BaselinePaths.query_model``), ``"previous"`` (the previous step's ``query/``)
            or ``None`` (no query model).
    """

    name: str
    stage: str
    query: str | None = None


_INIT_DOCUMENT = Step("init_document", "init_document")
BASELINES: dict[str, tuple[Step, ...]] = {
    "kale": (_INIT_DOCUMENT, Step(PRUNE_STEP, PRUNE_STEP), Step("align", "kale_align", "pruned")),
    "wang_lyu": (_INIT_DOCUMENT, Step(PRUNE_STEP, PRUNE_STEP), Step("distill", "embed_distill", "pruned")),
    "scalingnote": (_INIT_DOCUMENT, Step("distill", "kale_align", "small"),
                    Step("finetune", "stage1_sft", "previous")),
    "score_distill": (_INIT_DOCUMENT, Step("distill", "score_distill", "small")),
}

#: Built-in settings per baseline and step when no config folder is given (paper τ = 0.02, 1 + 7
#: negatives; a pruned decoder is pooled at its last token; the score-distillation teacher keeps its
#: native width).
_PAPER = {"loss.temperature": 0.02, "data.n_negatives": 7}
_DEFAULTS: dict[str, dict[str, dict[str, Any]]] = {
    "kale": {"align": {**_PAPER, "model.query_pooling": "lasttoken"}},
    "wang_lyu": {"distill": {"model.query_pooling": "lasttoken", "data.n_negatives": 0}},
    "scalingnote": {"distill": dict(_PAPER), "finetune": dict(_PAPER)},
    "score_distill": {"distill": {**_PAPER, "loss.lambda_distill": 1, "loss.lambda_contrastive": 1,
                                  "model.truncate_to_query_width": False}},
}
_INIT_DOCUMENT_DEFAULTS: dict[str, Any] = {**_PAPER, "model.truncate_to_query_width": False}
#: The sentence-transformers trainer baseline (care.train.recipes.st_mnrl) and its one step (config file ``train.yaml``).
ST_MNRL = "st-mnrl"
ST_MNRL_STEP = Step("train", "st_mnrl")


@dataclass
class PruneSettings(Config):
    """The prune step (``prune.yaml`` / ``prune:key=value``): keep ``layers`` of the document tower."""

    layers: int = DEFAULT_PRUNE_LAYERS
    keep: str = "first"
    trust_remote_code: bool = False


@dataclass
class BaselinePaths:
    """Inputs of a baseline run.

    Attributes:
        document_model: the LLM to fine-tune in ``init_document``, or (``document_trained``) an
            already-trained document tower (e.g. ``runs/care/init_document/document``) used as is.
        train_file: training JSONL ``{query, pos, neg, ...}``.
        output_dir: one sub-folder per step.
        query_model: the small BERT-style query encoder (ScalingNote, score distillation).
        document_trained: skip ``init_document`` (share one document tower across baselines).
    """

    document_model: str
    train_file: str
    output_dir: str
    query_model: str | None = None
    document_trained: bool = False


@dataclass
class BaselineResult:
    """What a baseline run produced.

    Attributes:
        model: what to evaluate (``care bench --model``): the CARE folder (query route + frozen document
            route) of an asymmetric baseline, or the symmetric student's folder for ``score_distill``.
        steps: each training step's :class:`TrainResult`.
        pruned_model: the prune step's folder, if any.
        document_model: the frozen document tower every step used.
    """

    name: str
    output_dir: str
    model: str | None
    document_model: str
    steps: dict[str, TrainResult] = field(default_factory=dict)
    pruned_model: str | None = None


def baseline_steps(name: str) -> tuple[Step, ...]:
    """The steps of baseline ``name``; raises :class:`ConfigError` naming the known baselines."""
    if name == ST_MNRL:
        return (ST_MNRL_STEP,)
    try:
        return BASELINES[name]
    except KeyError:
        raise ConfigError(f"unknown baseline {name!r}; choose from {', '.join([*BASELINES, ST_MNRL])}") from None


def _step_settings(step: Step, settings: Sequence[StageSetting]) -> list[StageSetting]:
    """Settings of ``step``: the every-step ones (training steps only), then ``<step>:key=value`` ones."""
    common = [s for s in settings if s.stage is None] if step.stage != PRUNE_STEP else []
    return common + [s for s in settings if s.stage == step.name]


def _step_data(name: str, step: Step, config_dir: str | Path | None) -> dict[str, Any]:
    path = Path(config_dir) / f"{step.name}.yaml" if config_dir is not None else None
    if path is not None and path.is_file():
        data = read_config_file(path)
        if step.stage != PRUNE_STEP and data.get("stage", step.stage) != step.stage:
            raise ConfigError(f"{path}: stage {data.get('stage')!r} does not match step {step.name!r} of "
                              f"{name} (expected {step.stage!r})")
        return data
    if step.stage == PRUNE_STEP:
        return PruneSettings().to_dict()
    defaults = _INIT_DOCUMENT_DEFAULTS if step.stage == "init_document" else _DEFAULTS[name].get(step.name, {})
    return TrainConfig.for_stage(step.stage, defaults).to_dict()


def _record_settings(out: Path, name: str, paths: BaselinePaths, settings: Sequence[StageSetting]) -> None:
    from care.train.recipes.recipe import record_run_settings, recorded_settings

    record = {"baseline": name, **asdict(paths), "settings": recorded_settings(settings)}
    record.pop("output_dir")
    record_run_settings(out / SETTINGS_FILE, record, "baseline", "give each baseline its own output folder")


def run_baseline(name: str, paths: BaselinePaths, settings: Sequence[StageSetting] = (), *,
                 config_dir: str | Path | None = None) -> BaselineResult:
    """Run (or finish) baseline ``name``; finished steps are skipped, an interrupted one resumes.

    Args:
        name: one of :data:`BASELINES` (``kale``, ``wang_lyu``, ``scalingnote``, ``score_distill``) or
            :data:`ST_MNRL` (``st-mnrl``: sentence-transformers' trainer, ``paths.document_model`` on both sides).
        paths: models, training file, output folder (:class:`BaselinePaths`).
        settings: typed settings for every training step or, with a stage, for one step (what
            :func:`care.train.stage_settings.parse_settings` makes of ``align:optim.lr=1e-4``, ``prune:layers=4``).
        config_dir: folder with ``<step>.yaml`` files (e.g. ``configs/baselines/kale``); ``None``:
            built-in defaults. Model paths, data files and output folders in them are replaced.
    Returns:
        :class:`BaselineResult` (``result.model`` is what to evaluate).
    """
    steps = baseline_steps(name)
    if name == ST_MNRL:
        return _run_st_mnrl(paths, settings, config_dir)
    if any(s.query == "small" for s in steps) and not paths.query_model:
        raise ConfigError(f"baseline {name} trains a small query encoder: give BaselinePaths.query_model "
                          "(e.g. a BERT-style checkpoint such as runs/tiny/tiny-bert)")
    out = Path(paths.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    _record_settings(out, name, paths, settings)
    teacher = paths.document_model if paths.document_trained else str(out / "init_document" / "document")
    result = BaselineResult(name, str(out), None, teacher)
    previous_query: str | None = None
    for step in steps:
        if step.stage == "init_document" and paths.document_trained:
            continue
        data = apply_settings(_step_data(name, step, config_dir), _step_settings(step, settings))
        if step.stage == PRUNE_STEP:
            result.pruned_model = _prune_step(out / step.name, teacher, data)
            continue
        query = {"pruned": result.pruned_model, "small": paths.query_model, "previous": previous_query,
                 None: None}[step.query]
        done = read_result(out / step.name)
        if done is not None and done.completed:
            logger.info("baseline %s: %s already finished, skipping", name, step.name)
            trained = done
        else:
            data.setdefault("stage", step.stage)  # a user's "<step>:stage=..." override wins
            wiring = {"output_dir": str(out / step.name), "data.train_file": paths.train_file,
                      "model.query_model": query,
                      "model.document_model": paths.document_model if step.stage == "init_document" else teacher}
            if step.stage != "init_document":
                wiring["model.teacher.kind"] = "document"
            data = apply_settings(data, wiring)
            logger.info("baseline %s: running %s (%s) -> %s", name, step.name, step.stage, out / step.name)
            trained = train(TrainConfig.from_dict(data), resume=True)
        result.steps[step.name] = trained
        previous_query = trained.query_model
    last = result.steps[steps[-1].name]
    result.model = last.care_model or last.query_model
    return result


def _run_st_mnrl(paths: BaselinePaths, settings: Sequence[StageSetting],
                 config_dir: str | Path | None) -> BaselineResult:
    """``st-mnrl``: ``paths.document_model`` fine-tuned on both sides into ``paths.output_dir``."""
    from care.train.recipes.st_mnrl import StMnrlConfig, train_st_mnrl

    if paths.query_model or paths.document_trained:
        raise ConfigError(f"baseline {ST_MNRL} trains one model on both sides: give it as the document model "
                          "(--document-model), without --query-model or --document-trained")
    path = Path(config_dir) / f"{ST_MNRL_STEP.name}.yaml" if config_dir is not None else None
    source = str(path) if path is not None and path.is_file() else None
    data = read_config_file(path) if source else StMnrlConfig().to_dict()
    config = StMnrlConfig.from_dict(apply_settings(data, _step_settings(ST_MNRL_STEP, settings)),
                                    source=source or "st-mnrl overrides")
    out = Path(paths.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    _record_settings(out, ST_MNRL, paths, settings)
    trained = train_st_mnrl(paths.document_model, paths.train_file, out, config)
    return BaselineResult(ST_MNRL, str(out), trained.query_model, str(trained.document_model),
                          steps={ST_MNRL_STEP.name: trained})


def _prune_step(target: Path, source: str, data: dict[str, Any]) -> str:
    """Prune ``source`` into ``target/model`` unless that folder already exists (it is written atomically)."""
    from care.models.prune import prune_layers

    prune = PruneSettings.from_dict(data, source="prune step")
    folder = target / PRUNED_DIRNAME
    settings = {"source": str(source), "layers": prune.layers, "keep": prune.keep}
    record = target / PRUNE_SETTINGS_FILE
    if (folder / "config.json").is_file() and record.is_file():
        before = json.loads(record.read_text(encoding="utf-8"))
        if before != settings:
            raise CareError(f"{folder} was pruned with {before}, not {settings}; use another output folder "
                            f"or delete {target}")
        logger.info("prune: %s exists, skipping", folder)
        return str(folder)
    from care.data.io import write_json

    path = prune_layers(source, prune.layers, folder, keep=prune.keep, trust_remote_code=prune.trust_remote_code)
    write_json(record, settings)
    return str(path)

