"""Build :class:`~care.curate.judges.base.Judge` objects from a :class:`JudgesConfig`."""

from __future__ import annotations

from care.curate.judges.base import Judge
from care.curate.judges.config import JudgeConfig, JudgesConfig


def build_judge(config: JudgeConfig) -> Judge:
    """An OpenAI-compatible chat judge, or an embedding judge over ``care.encoders.registry.load_model(encoder)``."""
    if config.kind == "openai":
        from care.curate.judges.openai_judge import OpenAIChatJudge

        return OpenAIChatJudge(config)
    from care.curate.judges.embedding_judge import EmbeddingJudge
    from care.encoders.base import Encoder
    from care.encoders.registry import load_model
    from care.errors import CareError

    encoder = load_model(config.encoder or "")
    if not isinstance(encoder, Encoder):
        raise CareError(f"judge {config.id!r}: encoder {config.encoder!r} is lexical; an embedding judge needs a dense encoder")
    return EmbeddingJudge(encoder, config.thresholds, judge_id=config.id, instruction=config.instruction,
                          passages_per_call=config.passages_per_call)


def build_judges(config: JudgesConfig) -> list[Judge]:
    return [build_judge(j) for j in config.judges]
