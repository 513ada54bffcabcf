"""Per-task query instructions in the paper's format, stored as sentence-transformers prompts.

The paper (after Qwen3-Embedding / E5-instruct) prefixes QUERIES with
``Instruct: {instruction}\\nQuery: {query}``; documents get no instruction. In a saved CARE folder the
prefixes live in ``config_sentence_transformers.json`` ``prompts`` under keys that both
sentence-transformers and mteb resolve for queries only:

* ``"query"``: the default instruction, used by ``model.encode_query(texts)``;
* ``"document"``: ``""``, so ``model.encode_document(texts)`` never falls back to a default prompt;
* ``"{task}-query"`` (e.g. ``"CMedTEB-Retrieval-query"``): per task —
  ``model.encode_query(texts, prompt_name="CMedTEB-Retrieval-query")``; mteb's
  ``SentenceTransformer`` wrapper looks up ``"{task name}-query"`` first, then
  ``"{task type}-query"`` (``"Retrieval-query"``, ``"Reranking-query"``, ``"STS-query"``), so plain
  task-name keys — which mteb would also apply to documents — are deliberately not used.
"""

from __future__ import annotations

from care.encoders.base import format_instruction
from care.errors import CareError

PAPER_INSTRUCTION_TEMPLATE = "Instruct: {instruction}\nQuery: {query}"

RETRIEVAL_INSTRUCTION = "Given a Chinese medical question, retrieve medical documents that answer the question."
RERANK_INSTRUCTION = (
    "Based on a Chinese medical question, evaluate and rank the medical information that provide answers to the question."
)
STS_INSTRUCTION = "Retrieve semantically similar text."

#: Instructions of the CMedTEB tasks (paper, Appendix) keyed by task name.
CMEDTEB_INSTRUCTIONS: dict[str, str] = {
    "CMedTEB-Retrieval": RETRIEVAL_INSTRUCTION,
    "CMedTEB-Demo-Retrieval": RETRIEVAL_INSTRUCTION,
    "CMedTEB-Rerank": RERANK_INSTRUCTION,
    "CMedQAv1-reranking": RERANK_INSTRUCTION,
    "CMedQAv2-reranking": RERANK_INSTRUCTION,
    "CMedTEB-STS": STS_INSTRUCTION,
}
#: mteb task types -> instruction, so any mteb task of that type gets the right instruction.
TASK_TYPE_INSTRUCTIONS: dict[str, str] = {
    "Retrieval": RETRIEVAL_INSTRUCTION,
    "Reranking": RERANK_INSTRUCTION,
    "STS": STS_INSTRUCTION,
}
DEFAULT_TASK = "CMedTEB-Retrieval"
QUERY_PROMPT = "query"
DOCUMENT_PROMPT = "document"
QUERY_SUFFIX = "-query"
_TASK_SUFFIX_RULES: tuple[tuple[str, str], ...] = (
    ("-Retrieval", RETRIEVAL_INSTRUCTION),
    ("-Rerank", RERANK_INSTRUCTION),
    ("-reranking", RERANK_INSTRUCTION),
    ("-STS", STS_INSTRUCTION),
)


def instruction_for_task(task_name: str) -> str:
    """The paper's instruction for a CMedTEB-style task name (``*-Retrieval``, ``*-Rerank``, ``*-STS``)."""
    if task_name in CMEDTEB_INSTRUCTIONS:
        return CMEDTEB_INSTRUCTIONS[task_name]
    for suffix, instruction in _TASK_SUFFIX_RULES:
        if task_name.endswith(suffix):
            return instruction
    raise CareError(
        f"no instruction known for task {task_name!r}; name it *-Retrieval, *-Rerank or *-STS, "
        "or pass the instruction explicitly"
    )


def prompt_prefix(instruction: str, template: str = PAPER_INSTRUCTION_TEMPLATE) -> str:
    """The text put before a query: ``template`` with the query left empty (it must end in ``{query}``)."""
    if not template.endswith("{query}") or "{instruction}" not in template:
        raise CareError(
            f"instruction template {template!r} must contain {{instruction}} and end with {{query}} "
            "(sentence-transformers prompts are prefixes)"
        )
    return format_instruction(instruction, "", template)


def query_prompt_name(task_name: str) -> str:
    """Prompt key of a task's query instruction: ``"CMedTEB-Retrieval"`` -> ``"CMedTEB-Retrieval-query"``."""
    return task_name if task_name.endswith(QUERY_SUFFIX) else task_name + QUERY_SUFFIX


def build_prompts(
    instructions: dict[str, str] | None = None,
    *,
    default_task: str | None = DEFAULT_TASK,
    template: str = PAPER_INSTRUCTION_TEMPLATE,
) -> dict[str, str]:
    """sentence-transformers ``prompts`` for a CARE model (query-only keys; see module docstring).

    Args:
        instructions: task name -> instruction; None = the CMedTEB instructions (plus mteb task types).
        default_task: task whose instruction ``encode_query`` uses by default; None = no default
            instruction (``"query"`` prompt is empty).
        template: instruction format; must end with ``{query}``.
    """
    if instructions is None:
        instructions = {**CMEDTEB_INSTRUCTIONS, **TASK_TYPE_INSTRUCTIONS}
    prompts = {query_prompt_name(task): prompt_prefix(text, template) for task, text in instructions.items()}
    if default_task is None:
        prompts[QUERY_PROMPT] = ""
    else:
        key = query_prompt_name(default_task)
        if key not in prompts:
            raise CareError(f"default task {default_task!r} has no instruction; known tasks: {sorted(instructions)}")
        prompts[QUERY_PROMPT] = prompts[key]
    prompts[DOCUMENT_PROMPT] = ""
    return prompts


def instructions_from_prompts(prompts: dict[str, str], template: str = PAPER_INSTRUCTION_TEMPLATE) -> dict[str, str]:
    """Inverse of :func:`build_prompts` for the per-task keys (used when re-combining split towers)."""
    before, _, _ = template.partition("{instruction}")
    after = template.split("{instruction}", 1)[1].replace("{query}", "")
    out = {}
    for key, text in prompts.items():
        if key.endswith(QUERY_SUFFIX) and text.startswith(before) and text.endswith(after):
            out[key[: -len(QUERY_SUFFIX)]] = text[len(before): len(text) - len(after)]
    return out
