"""The static query tower trained as CARE: its own settings, turned into the recipe's stage settings.

When the recipe's query tower is a static tower (``e5?layers=0``: one row per token and a mean, no transformer;
:mod:`care.train.engine.static_query`), every stage that trains it alone — ``init_query`` (the symmetric small model
at depth 0), Stage I's alignment (``stage1``) and ranking (``stage1_rank``) parts — trains it at the learning rate of
:class:`StaticTowerConfig`, an order or two above a transformer's: a lookup table gets one gradient row per token
occurrence, not a shared network's (sentence-transformers #2982; LightRetriever, arXiv 2505.12260, trains its
EmbeddingBag query side the same way). Its per-token weights start at IDF (or 1) in the first of those stages and
may be learned in each; what a stage saves folds them into the rows. Stage II trains the document tower jointly with
it (the documents move toward what a lookup can express), the static tower at ``stage2_lr`` when set.

:func:`static_tower_settings` gives these as typed stage settings that go before the run's own, so a user's
``stage1:optim.lr=...`` still wins; :func:`care.train.recipes.recipe.run_recipe` applies them when its query tower is
static. The defaults were chosen on the first dev set's validation split (never its test split):
``benchmarks/results/static_tower/toyhom_screen_validation.json`` (``benchmarks/static_care_screen.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from care.config import Config, ConfigError
from care.train.engine.config import QUERY_TOKEN_WEIGHTS
from care.train.stage_settings import StageSetting

#: Recipe stages that train the static query tower alone (its own learning rate applies there).
STATIC_STAGES: tuple[str, ...] = ("init_query", "stage1", "stage1_rank")
#: Stage I's learning rate of a static query tower (the e5 preset's 6-layer tower: 2e-4), a thousand times the
#: transformer's. Chosen on the first dev set's validation split, Stage I against frozen e5 on 2,000 pairs
#: (``benchmarks/results/static_tower/toyhom_screen_validation.json``): nDCG@10 0.194 at 1e-2, 0.273 at 5e-2, 0.284 at
#: 2e-1, 0.268 at 5e-1 (IDF-initialised learned weights; e5 zero-shot 0.345).
#: At every training row with every corpus sentence on Stage I's query side (the alignment screens below), the rate
#: is flat and 5e-2 leads on both dev sets: 0.3436 against 0.3429 at 2e-1 (``toyhom_screen_validation_full.json``),
#: 0.8868 against 0.8849 at 2e-1 and 0.8857 at 5e-1 (``kuake_qtr_screen_validation_full.json``).
STATIC_LR = 5e-2
#: Where its per-token weights start (``idf``: the IDF of the stage's query texts; ``None``: 1 / a plain mean). Same
#: screen: at 2e-1, IDF-initialised learned weights 0.284 against none 0.270; at 5e-2, learned 0.273, IDF fixed 0.269,
#: none 0.251.
STATIC_TOKEN_WEIGHTS: str | None = "idf"
#: Whether Stage I learns the per-token weights beside the rows (chosen by the same screen).
STATIC_LEARN_WEIGHTS = True
#: Whether Stage I's query side also takes every short sentence / title of the run's corpus (a lookup table learns only
#: the rows of the tokens it sees). Chosen on the second dev set's validation split, every training row, the whole
#: corpus, Stage I against frozen e5 (``benchmarks/results/static_tower/kuake_qtr_screen_validation_full.json``):
#: nDCG@10 0.8215 on the training queries alone, 0.8849 with the corpus's 27,405 sentences (e5 zero-shot 0.9009); the
#: first dev set agrees (``toyhom_screen_validation_full.json``, 1,500 documents): 0.3234 -> 0.3429 (e5 0.3445).
STATIC_CORPUS_SENTENCES = True


@dataclass
class StaticTowerConfig(Config):
    """How the recipe trains a static query tower (ignored for any other query tower).

    Attributes:
        lr: learning rate of every stage that trains it alone (:data:`STATIC_STAGES`; default :data:`STATIC_LR`).
        token_weights: ``idf`` or ``null``: where its per-token weights start, in the first such stage.
        learn_weights: train the per-token weights too (in every such stage).
        stage2_lr: Stage II's learning rate of the static tower (the document tower keeps ``optim.document_lr``);
            ``null``: Stage II's own ``optim.lr``.
        corpus_sentences: ``care run``'s Stage I aligns it on every short sentence / title of the run's corpus too
            (query-side rows after the training queries, no document-side rows), where ``recipes.care.alignment_sentences``
            and ``alignment_documents`` are unset (:data:`STATIC_CORPUS_SENTENCES`).
    """

    lr: float = STATIC_LR
    token_weights: str | None = STATIC_TOKEN_WEIGHTS
    learn_weights: bool = STATIC_LEARN_WEIGHTS
    stage2_lr: float | None = None
    corpus_sentences: bool = STATIC_CORPUS_SENTENCES

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        if not (isinstance(self.lr, int | float) and self.lr > 0):
            raise ConfigError(f"config field 'static_tower.lr': must be > 0, got {self.lr!r}")
        if self.stage2_lr is not None and not (isinstance(self.stage2_lr, int | float) and self.stage2_lr > 0):
            raise ConfigError(f"config field 'static_tower.stage2_lr': must be > 0 or null, got {self.stage2_lr!r}")
        if self.token_weights not in QUERY_TOKEN_WEIGHTS:
            raise ConfigError(f"config field 'static_tower.token_weights': must be idf or null, got "
                              f"{self.token_weights!r}")
        for name in ("learn_weights", "corpus_sentences"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"config field 'static_tower.{name}': expected true/false, got "
                                  f"{getattr(self, name)!r}")


def static_tower_settings(config: StaticTowerConfig, stages: Sequence[str]) -> list[StageSetting]:
    """The stage settings of a run whose query tower is static and which trains ``stages``: each of
    :data:`STATIC_STAGES` among them at ``config.lr`` (learning the weights if asked), the first one starting the
    weights at ``config.token_weights``, Stage II at ``config.stage2_lr`` when set."""
    trained = [stage for stage in STATIC_STAGES if stage in stages]
    out: list[StageSetting] = []
    for stage in trained:
        out += [StageSetting("optim.lr", config.lr, stage),
                StageSetting("model.learn_query_token_weights", config.learn_weights, stage)]
    if trained and config.token_weights is not None:
        out.append(StageSetting("model.query_token_weights", config.token_weights, trained[0]))
    if config.stage2_lr is not None and "stage2" in stages:
        out.append(StageSetting("optim.lr", config.stage2_lr, "stage2"))
    return out
