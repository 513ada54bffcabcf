"""Relevance judges behind one protocol: an OpenAI-compatible LLM judge, an offline embedding judge,
a persistent SQLite cache of judgments, and a concurrent runner (see :mod:`.runner`)."""

from care.curate.judges.base import GRADES, Judge, JudgeError, JudgePair, Usage

__all__ = ["GRADES", "Judge", "JudgeError", "JudgePair", "Usage"]
