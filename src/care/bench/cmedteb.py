"""The five CMedTEB tasks of the paper with the paper's instructions (registered by :mod:`care.bench.registry`).

The benchmark data is not public; each task reads ``<data-root>/<task name>/`` in the documented
folder formats (``--data-root`` or ``$CMEDTEB_DATA``).
"""

from __future__ import annotations

from care.bench.task import TaskMetadata

RETRIEVAL_INSTRUCTION = "Given a Chinese medical question, retrieve medical documents that answer the question."
RERANK_INSTRUCTION = (
    "Based on a Chinese medical question, evaluate and rank the medical information that provide answers to the question."
)
STS_INSTRUCTION = "Retrieve semantically similar text."

CMEDTEB_TASKS: tuple[TaskMetadata, ...] = (
    TaskMetadata(name="CMedTEB-Retrieval", type="retrieval", instruction=RETRIEVAL_INSTRUCTION,
                 description="CMedTEB medical retrieval: LLM-judged (3-judge agreement) relevance over a pooled corpus."),
    TaskMetadata(name="CMedTEB-Rerank", type="rerank", instruction=RERANK_INSTRUCTION,
                 description="CMedTEB reranking: candidates sampled from the judged pool."),
    TaskMetadata(name="CMedQAv1-reranking", type="rerank", instruction=RERANK_INSTRUCTION,
                 description="cMedQA v1 answer reranking, scored by MAP@10 as in the paper.", extra_scores=("map_at_1000",)),
    TaskMetadata(name="CMedQAv2-reranking", type="rerank", instruction=RERANK_INSTRUCTION,
                 description="cMedQA v2 answer reranking, scored by MAP@10 as in the paper.", extra_scores=("map_at_1000",)),
    TaskMetadata(name="CMedTEB-STS", type="sts", instruction=STS_INSTRUCTION,
                 description="Medical synonym STS: synonym swaps with kept / changed meaning."),
)
