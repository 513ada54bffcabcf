"""CARE's losses as composable ``nn.Module``s (inputs: L2-normalised embeddings unless stated).

- :class:`InfoNCELoss` / :class:`AsymInfoNCELoss`: in-batch + hard (+ cross-device) negatives.
- :class:`EmbeddingMSELoss`: Stage I squared distance between two encoders' vectors of one text.
- :class:`MatryoshkaLoss`: wrap any embedding loss, average over nested dims (document encoder MRL).
- :class:`ScoreDistillKLLoss` / :class:`ScoreDistillLoss`: the score-distillation baseline.
- :class:`CandidateKLLoss` / :class:`InBatchScoreDistillLoss`: KALE's KL alignment and in-batch score
  distillation against a frozen teacher encoder.
- :class:`CandidateBankKLLoss` / :class:`BankDistillLoss`: the teacher's ranking of a fixed bank of
  frozen document vectors (every document of the training file), distilled into the query encoder.
- :class:`WeightedSum` / :class:`StageOneLoss`: named weighted terms returning :class:`LossOutput`.
"""

from care.train.engine.losses.bank_distill import BankDistillLoss, CandidateBankKLLoss
from care.train.engine.losses.combined import StageOneLoss, WeightedSum
from care.train.engine.losses.distill import ScoreDistillKLLoss, ScoreDistillLoss
from care.train.engine.losses.infonce import STAGE_ONE_TEMPERATURE, STAGE_TWO_TEMPERATURE, AsymInfoNCELoss, InfoNCELoss
from care.train.engine.losses.kl_align import CandidateKLLoss, InBatchScoreDistillLoss
from care.train.engine.losses.matryoshka import MatryoshkaLoss
from care.train.engine.losses.mse import EmbeddingMSELoss
from care.train.engine.losses.output import LossOutput

__all__ = [
    "STAGE_ONE_TEMPERATURE",
    "STAGE_TWO_TEMPERATURE",
    "AsymInfoNCELoss",
    "BankDistillLoss",
    "CandidateBankKLLoss",
    "CandidateKLLoss",
    "EmbeddingMSELoss",
    "InBatchScoreDistillLoss",
    "InfoNCELoss",
    "LossOutput",
    "MatryoshkaLoss",
    "ScoreDistillKLLoss",
    "ScoreDistillLoss",
    "StageOneLoss",
    "WeightedSum",
]
