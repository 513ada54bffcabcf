"""Every training stage, declared once: which tower encodes each batch field, the loss, the defaults.

Adding a stage is one :class:`StageDeclaration` in :data:`STAGE_DECLARATIONS`; the config's stage
names and checks (:mod:`care.train.engine.config`), the runtime routing (:func:`care.train.engine.stage.build_stage`),
the recipe's defaults (:mod:`care.train.recipes.recipe`) and the baselines (:mod:`care.train.recipes.baselines`) read it.

A batch has three fields (see :mod:`care.train.engine.batches`): ``query`` (``B`` texts), ``positive``
(``B``) and ``negative`` (``B·k``, query-major). Each stage maps the fields it uses to a tower —
``"query"`` (E_q), ``"document"`` (E_d), or ``"teacher"`` (frozen, cached E_d / any Encoder):

==============  =================  ==================  ================================================
stage           query field        positive/negative   loss
==============  =================  ==================  ================================================
init_query      E_q                E_q                 InfoNCE (symmetric), τ = loss.temperature
init_document   E_d                E_d                 MatryoshkaLoss(InfoNCE, loss.matryoshka_dims)
stage1          E_q                teacher (frozen)    λ1·Asym-InfoNCE + λ2·MSE  (StageOneLoss, τ≈0.1)
stage1_sft      E_q                teacher (frozen)    Asym-InfoNCE of E_q(q) vs teacher(d⁺, d⁻)
stage2          E_q                E_d                 Asym-InfoNCE, hard + in-batch (+ cross-device)
stage2_distill  E_q                E_d                 λ1·Asym-InfoNCE + λ_distill·KL(teacher ‖ CARE) over the batch
bank_distill    E_q                teacher: the bank   KL(softmax(T(q)·Bankᵀ/τ_t) ‖ softmax(E_q(q)·Bankᵀ/τ)) + λ2·MSE
==============  =================  ==================  ================================================

(``Bank`` = the frozen teacher's vectors of every positive and negative of the training file.)

``stage2_distill`` is Stage II with the teacher fields below (``teacher_query``, ``teacher_positive``,
``teacher_negative``): the frozen teacher — by default the document tower Stage II starts from, i.e. the
symmetric large model — scores the batch's candidates with its own query and document vectors, and the
jointly trained CARE model learns that distribution beside the labels (:class:`InBatchScoreDistillLoss`).

The paper's efficient-retrieval baselines (:mod:`care.train.recipes.baselines`) add *teacher fields*: the
texts of a batch field embedded again by the frozen, cached teacher (``teacher_query`` = the query
text as the student sees it, ``teacher_positive``, ``teacher_negative``):

=============  ===========  ==========================  =============================================
stage          student E_s  teacher fields              loss
=============  ===========  ==========================  =============================================
kale_align     query        query, positive, negative   KL(softmax(T(q)·T(C)/τ_t) ‖ softmax(E_s(q)·T(C)/τ_s))
embed_distill  query        query                       ‖E_s(q) − T(q)‖² (Wang & Lyu)
score_distill  q, pos, neg  query, positive, negative   λ_distill·KL(teacher ‖ student scores) + λ1·InfoNCE
=============  ===========  ==========================  =============================================

(``C`` = in-batch positives + hard negatives; ``T`` = the frozen teacher.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

FIELDS: tuple[str, ...] = ("query", "positive", "negative")
QUERY_TOWER, DOCUMENT_TOWER, TEACHER = "query", "document", "teacher"
#: Teacher fields of the baseline stages: the same texts as the batch field, embedded by the teacher.
TEACHER_FIELD_SOURCES: dict[str, str] = {"teacher_query": "query", "teacher_positive": "positive",
                                         "teacher_negative": "negative"}


class LossSettings(Protocol):
    """What a loss is built from (the fields of :class:`care.train.engine.config.LossConfig`)."""

    temperature: float
    lambda_contrastive: float
    lambda_mse: float
    teacher_temperature: float | None
    lambda_distill: float
    bank_size: int | None
    matryoshka_dims: list[int] | None
    gather_across_devices: bool
    duplicate_threshold: float | None


@dataclass(frozen=True)
class LossCheck:
    """A condition on the loss settings: ``ok(settings)`` must hold, else ``field`` gets ``problem``."""

    field: str
    ok: Callable[[LossSettings], bool]
    problem: str


@dataclass(frozen=True)
class StageDeclaration:
    """One stage, declared.

    Attributes:
        name: the stage name (``TrainConfig.stage``).
        summary: one line for help texts.
        field_towers: ``{field: "query" | "document" | "teacher"}`` for every field the stage encodes.
        loss: builds the loss ``nn.Module`` from the loss settings; it is called with the embeddings of
            ``loss_args`` in order.
        loss_args: field names passed positionally to the loss.
        defaults: dotted-key hyperparameters a stage starts from when no config file is given (the paper's).
        teacher_embeds_query_side: ``model.teacher.query_side_as_queries`` applies (Stage I rows ``(q, q, q⁻)``).
        candidate_bank: the loss scores every query against a bank of the teacher's vectors of all the
            training file's documents (the trainer fills it from the teacher cache).
        loss_checks: conditions on the loss settings checked with the config.
    """

    name: str
    summary: str
    field_towers: Mapping[str, str]
    loss: Callable[[LossSettings], Any]
    loss_args: tuple[str, ...] = FIELDS
    defaults: Mapping[str, Any] = field(default_factory=dict)
    teacher_embeds_query_side: bool = False
    candidate_bank: bool = False
    loss_checks: tuple[LossCheck, ...] = ()

    @property
    def towers(self) -> frozenset[str]:
        return frozenset(self.field_towers.values())

    @property
    def trains_query_tower(self) -> bool:
        return QUERY_TOWER in self.towers

    @property
    def trains_document_tower(self) -> bool:
        return DOCUMENT_TOWER in self.towers

    @property
    def uses_teacher(self) -> bool:
        """The document side is a frozen teacher (its embeddings cached once, never trained)."""
        return TEACHER in self.towers


# ------------------------------------------------------------------------------------------- losses
def _infonce(lc: LossSettings):
    from care.train.engine.losses import InfoNCELoss

    return InfoNCELoss(lc.temperature, gather_across_devices=lc.gather_across_devices,
                       duplicate_threshold=lc.duplicate_threshold)


def _matryoshka_infonce(lc: LossSettings):
    from care.train.engine.losses import MatryoshkaLoss

    loss = _infonce(lc)
    return MatryoshkaLoss(loss, lc.matryoshka_dims) if lc.matryoshka_dims else loss


def _asym_infonce(lc: LossSettings):
    from care.train.engine.losses import AsymInfoNCELoss

    return AsymInfoNCELoss(lc.temperature, gather_across_devices=lc.gather_across_devices,
                           duplicate_threshold=lc.duplicate_threshold)


def _stage_one(lc: LossSettings):
    from care.train.engine.losses import StageOneLoss

    return StageOneLoss(lc.temperature, lc.lambda_contrastive, lc.lambda_mse, gather_across_devices=lc.gather_across_devices,
                        duplicate_threshold=lc.duplicate_threshold)


def _candidate_kl(lc: LossSettings):
    from care.train.engine.losses import CandidateKLLoss

    return CandidateKLLoss(lc.temperature, lc.teacher_temperature, gather_across_devices=lc.gather_across_devices)


def _embedding_mse(lc: LossSettings):
    from care.train.engine.losses import EmbeddingMSELoss

    return EmbeddingMSELoss()


def _score_distill(lc: LossSettings):
    from care.train.engine.losses import InBatchScoreDistillLoss

    return InBatchScoreDistillLoss(lc.temperature, lc.teacher_temperature, lambda_kl=lc.lambda_distill,
                                   lambda_nce=lc.lambda_contrastive, gather_across_devices=lc.gather_across_devices)


def _bank_distill(lc: LossSettings):
    from care.train.engine.losses import BankDistillLoss

    return BankDistillLoss(lc.temperature, lc.teacher_temperature, lambda_distill=lc.lambda_distill,
                           lambda_mse=lc.lambda_mse)


_CONTRASTIVE_OR_MSE = LossCheck("loss.lambda_contrastive", lambda lc: lc.lambda_contrastive + lc.lambda_mse > 0,
                                "λ1 and λ2 cannot both be 0")
_ALL_QUERY = {"query": QUERY_TOWER, "positive": QUERY_TOWER, "negative": QUERY_TOWER}
_QUERY_VS_TEACHER = {"query": QUERY_TOWER, "positive": TEACHER, "negative": TEACHER}

STAGE_DECLARATIONS: dict[str, StageDeclaration] = {d.name: d for d in (
    StageDeclaration("init_query", "symmetric InfoNCE fine-tune of the query encoder alone (queries and documents "
                     "both through E_q)", _ALL_QUERY, _infonce, defaults={"loss.temperature": 0.02},
                     loss_checks=(_CONTRASTIVE_OR_MSE,)),
    StageDeclaration("init_document", "LoRA + Matryoshka (MRL) InfoNCE fine-tune of the document encoder alone",
                     {"query": DOCUMENT_TOWER, "positive": DOCUMENT_TOWER, "negative": DOCUMENT_TOWER},
                     _matryoshka_infonce, defaults={"loss.temperature": 0.02}, loss_checks=(_CONTRASTIVE_OR_MSE,)),
    StageDeclaration("stage1", "query alignment: E_q learns λ1·Asym-InfoNCE + λ2·MSE against the frozen, cached "
                     "teacher", _QUERY_VS_TEACHER, _stage_one,
                     defaults={"loss.temperature": 0.1, "data.n_negatives": 1, "loss.lambda_contrastive": 1.0,
                               "loss.lambda_mse": 1.0},
                     teacher_embeds_query_side=True, loss_checks=(_CONTRASTIVE_OR_MSE,)),
    StageDeclaration("stage1_sft", "supervised fine-tune of the query side alone against the frozen teacher's "
                     "cached document embeddings", _QUERY_VS_TEACHER, _asym_infonce,
                     defaults={"loss.temperature": 0.02}, loss_checks=(_CONTRASTIVE_OR_MSE,)),
    StageDeclaration("stage2", "joint fine-tuning of both encoders with Asym-InfoNCE, hard + in-batch "
                     "(+ cross-device) negatives",
                     {"query": QUERY_TOWER, "positive": DOCUMENT_TOWER, "negative": DOCUMENT_TOWER}, _asym_infonce,
                     defaults={"loss.temperature": 0.02, "data.n_negatives": 7}, loss_checks=(_CONTRASTIVE_OR_MSE,)),
    StageDeclaration("stage2_distill", "Stage II plus in-batch score distillation: both encoders train with "
                     "λ1·Asym-InfoNCE + λ_distill·KL to the frozen teacher's (symmetric large's) scores of the batch",
                     {"query": QUERY_TOWER, "positive": DOCUMENT_TOWER, "negative": DOCUMENT_TOWER,
                      "teacher_query": TEACHER, "teacher_positive": TEACHER, "teacher_negative": TEACHER},
                     _score_distill,
                     loss_args=("query", "positive", "negative", "teacher_query", "teacher_positive", "teacher_negative"),
                     defaults={"loss.temperature": 0.02, "data.n_negatives": 7},
                     loss_checks=(LossCheck("loss.lambda_distill", lambda lc: lc.lambda_distill + lc.lambda_contrastive > 0,
                                            "λ_distill and λ_contrastive cannot both be 0"),)),
    StageDeclaration("bank_distill", "listwise distillation: E_q learns the frozen teacher's ranking of every document "
                     "of the training file (KL over the cached bank) + λ2·MSE to the teacher's query vector",
                     {"query": QUERY_TOWER, "teacher_query": TEACHER}, _bank_distill,
                     loss_args=("query", "teacher_query"), defaults={"loss.temperature": 0.02, "data.n_negatives": 0},
                     candidate_bank=True,
                     loss_checks=(LossCheck("loss.lambda_distill", lambda lc: lc.lambda_distill + lc.lambda_mse > 0,
                                            "λ_distill and λ2 cannot both be 0"),)),
    # the paper's efficient-retrieval baselines; in kale_align the student's candidates are the teacher's:
    # positive / negative are passed twice
    StageDeclaration("kale_align", "KALE: KL between the student's and the teacher's in-batch score distributions",
                     {**_QUERY_VS_TEACHER, "teacher_query": TEACHER}, _candidate_kl,
                     loss_args=("query", "positive", "negative", "teacher_query", "positive", "negative")),
    StageDeclaration("embed_distill", "Wang & Lyu: MSE between the student's and the teacher's vector of the query",
                     {"query": QUERY_TOWER, "teacher_query": TEACHER}, _embedding_mse,
                     loss_args=("query", "teacher_query")),
    StageDeclaration("score_distill", "symmetric student: λ_distill·KL on the teacher's scores + λ1·InfoNCE",
                     {**_ALL_QUERY, "teacher_query": TEACHER, "teacher_positive": TEACHER, "teacher_negative": TEACHER},
                     _score_distill,
                     loss_args=("query", "positive", "negative", "teacher_query", "teacher_positive", "teacher_negative"),
                     loss_checks=(LossCheck("loss.lambda_distill", lambda lc: lc.lambda_distill + lc.lambda_contrastive > 0,
                                            "λ_distill and λ_contrastive cannot both be 0"),)),
)}
STAGES: tuple[str, ...] = tuple(STAGE_DECLARATIONS)


def stage_declaration(name: str) -> StageDeclaration:
    """The declaration of stage ``name``; a :class:`KeyError`-free lookup for validated configs."""
    return STAGE_DECLARATIONS[name]
