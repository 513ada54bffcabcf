"""Request and response bodies of the search service (pydantic models; they make ``/openapi.json``).

Static rules live here (text the encoder can take — :mod:`care.serve.validation` —, k >= 1, known
sides, and a bound on every field: instruction length, filter fields / values, names); limits that
depend on the :class:`~care.serve.config.ServeConfig` (longest query, largest k, most inputs) are
checked by the handlers, which answer 422 with a message naming the limit.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from care.serve.validation import (
    MAX_FILTER_FIELDS,
    MAX_FILTER_TEXT_CHARS,
    MAX_FILTER_VALUES,
    MAX_INSTRUCTION_CHARS,
    MAX_NAME_CHARS,
    check_plain,
    check_text,
)

Side = Literal["query", "document"]
FilterValue = str | int | float | bool | list[str | int | float | bool]


def _not_blank(value: str, what: str) -> str:
    if not value.strip():
        raise ValueError(f"{what} is empty; send some text")
    return check_text(value, what)


def _texts(value: str | list[str], what: str) -> str | list[str]:
    if isinstance(value, str):
        return check_text(value, what)
    for i, text in enumerate(value):
        check_text(text, f"{what}[{i}]")
    return value


def _bounded(value: str | None, what: str, limit: int) -> str | None:
    """No lone surrogate or NUL, at most ``limit`` characters. (Checked here rather than with Field's
    ``max_length``: pydantic refuses a surrogate there with a message nobody understands.)"""
    if value is None:
        return None
    if len(value) > limit:
        raise ValueError(f"{what} has {len(value)} characters; at most {limit}")
    return check_plain(value, what)


def _instruction(value: str | None) -> str | None:
    return _bounded(value, "instruction", MAX_INSTRUCTION_CHARS)


def _check_filters(value: dict[str, Any] | None) -> dict[str, Any] | None:
    if value is None:
        return None
    if len(value) > MAX_FILTER_FIELDS:
        raise ValueError(f"filters has {len(value)} fields; at most {MAX_FILTER_FIELDS}")
    for key, item in value.items():
        if len(key) > MAX_FILTER_TEXT_CHARS:
            raise ValueError(f"filter field name of {len(key)} characters; at most {MAX_FILTER_TEXT_CHARS}")
        check_plain(key, "a filter field name")
        values = item if isinstance(item, list) else [item]
        if len(values) > MAX_FILTER_VALUES:
            raise ValueError(f"filters.{key} lists {len(values)} values; at most {MAX_FILTER_VALUES}")
        for v in values:
            if isinstance(v, str):
                if len(v) > MAX_FILTER_TEXT_CHARS:
                    raise ValueError(f"a filters.{key} value has {len(v)} characters; at most {MAX_FILTER_TEXT_CHARS}")
                check_plain(v, f"a filters.{key} value")
    return value


class SearchRequest(BaseModel):
    """``POST /search``: one query, the number of hits, optional metadata filters."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(..., description="The user's question.", examples=["高血压患者能吃布洛芬吗"])
    k: int | None = Field(None, ge=1, description="Number of documents to return (default and maximum set by the server).")
    filters: dict[str, FilterValue] | None = Field(
        None, description="Metadata equality filters, e.g. {\"department\": \"cardiology\"}; a list means any of.")
    instruction: str | None = Field(None, description="Task instruction for the query (default: the index's).",
                                    json_schema_extra={"maxLength": MAX_INSTRUCTION_CHARS})

    @field_validator("query")
    @classmethod
    def _query(cls, value: str) -> str:
        return _not_blank(value, "query")

    @field_validator("filters")
    @classmethod
    def _filters(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return _check_filters(value)

    @field_validator("instruction")
    @classmethod
    def _instruction(cls, value: str | None) -> str | None:
        return _instruction(value)


class Hit(BaseModel):
    id: str
    score: float
    title: str
    text: str
    metadata: dict[str, Any]


class SearchResponse(BaseModel):
    hits: list[Hit]
    k: int
    took_ms: float = Field(..., description="Server time for encoding + search + lookup.")


class EmbedRequest(BaseModel):
    """``POST /embed``: texts to embed on the query side (default) or document side."""

    model_config = ConfigDict(extra="forbid")

    inputs: str | list[str] = Field(..., description="One text or a list of texts.")
    side: Side = Field("query", description="'query' (the small query encoder) or 'document' (only if loaded).")
    instruction: str | None = Field(None, description="Task instruction for queries (default: the index's).",
                                    json_schema_extra={"maxLength": MAX_INSTRUCTION_CHARS})

    @field_validator("inputs")
    @classmethod
    def _inputs(cls, value: str | list[str]) -> str | list[str]:
        return _texts(value, "inputs")

    @field_validator("instruction")
    @classmethod
    def _instruction(cls, value: str | None) -> str | None:
        return _instruction(value)


class EmbedResponse(BaseModel):
    embeddings: list[list[float]]
    dim: int
    side: Side


class OpenAIEmbeddingRequest(BaseModel):
    """``POST /v1/embeddings`` as OpenAI defines it, plus ``input_type`` / ``instruction``.

    ``model`` must be a name the service lists at ``/v1/models`` (404 otherwise). The side is
    ``input_type`` when given, else ``document`` when ``model`` ends with ``:document`` (so an
    unmodified OpenAI client picks it by model name), else ``query``. Inputs are embedded as
    sent: a client that formats its own instruction (like ``care bench`` with ``openai:...``) gets no
    second one.
    """

    model_config = ConfigDict(extra="allow")

    input: str | list[str] = Field(..., description="Text or list of texts (token arrays are not accepted).")
    model: str | None = Field(None, description="A name listed by GET /v1/models (default: the query side's); the "
                              "':document' name selects the document side; any other name -> 404.",
                              json_schema_extra={"maxLength": MAX_NAME_CHARS})
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(None, ge=1, description="Matryoshka width: keep the first N coordinates, re-normalised.")
    input_type: Side | None = Field(None, description="'query' or 'document' (overrides the model-name suffix).")
    instruction: str | None = Field(None, description="Optional task instruction applied to query inputs.",
                                    json_schema_extra={"maxLength": MAX_INSTRUCTION_CHARS})
    user: str | None = Field(None, json_schema_extra={"maxLength": MAX_NAME_CHARS})

    @field_validator("input")
    @classmethod
    def _input(cls, value: str | list[str]) -> str | list[str]:
        return _texts(value, "input")

    @field_validator("instruction")
    @classmethod
    def _instruction(cls, value: str | None) -> str | None:
        return _instruction(value)

    @field_validator("model", "user")
    @classmethod
    def _names(cls, value: str | None, info: Any) -> str | None:
        return _bounded(value, info.field_name, MAX_NAME_CHARS)


class OpenAIEmbedding(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str


class OpenAIUsage(BaseModel):
    prompt_tokens: int
    total_tokens: int


class OpenAIEmbeddingResponse(BaseModel):
    object: Literal["list"] = "list"
    data: list[OpenAIEmbedding]
    model: str
    usage: OpenAIUsage


class OpenAIModel(BaseModel):
    """One entry of ``GET /v1/models``: a side the service embeds with."""

    id: str
    object: Literal["model"] = "model"
    created: int = Field(..., description="Unix time the service started.")
    owned_by: str = "care"


class OpenAIModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[OpenAIModel]


class Health(BaseModel):
    status: Literal["ok"]
    documents: int
    dim: int
    index: dict[str, Any]
    query_encoder: str
    document_encoder: str | None
    #: The model whose document side encoded the index (``care index build --model``): with ``query_encoder``,
    #: which towers answer a search (CARE: the small query tower over the large tower's document vectors).
    index_model: str
    model_matches_index: bool
