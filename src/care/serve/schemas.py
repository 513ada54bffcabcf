"""Request and response bodies of the search service (pydantic models; they make ``/openapi.json``).

Static rules live here (non-empty text, k >= 1, known sides); limits that depend on the
:class:`~care.serve.config.ServeConfig` (longest query, largest k, most inputs) are checked by the
handlers, which answer 422 with a message naming the limit.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Side = Literal["query", "document"]
FilterValue = str | int | float | bool | list[str | int | float | bool]


def _not_blank(value: str, what: str) -> str:
    if not value.strip():
        raise ValueError(f"{what} is empty; send some text")
    return value


class SearchRequest(BaseModel):
    """``POST /search``: one query, the number of hits, optional metadata filters."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(..., description="The user's question.", examples=["高血压患者能吃布洛芬吗"])
    k: int | None = Field(None, ge=1, description="Number of documents to return (default and maximum set by the server).")
    filters: dict[str, FilterValue] | None = Field(
        None, description="Metadata equality filters, e.g. {\"department\": \"cardiology\"}; a list means any of.")
    instruction: str | None = Field(None, description="Task instruction for the query (default: the index's).")

    @field_validator("query")
    @classmethod
    def _query(cls, value: str) -> str:
        return _not_blank(value, "query")


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
    instruction: str | None = Field(None, description="Task instruction for queries (default: the index's).")


class EmbedResponse(BaseModel):
    embeddings: list[list[float]]
    dim: int
    side: Side


class OpenAIEmbeddingRequest(BaseModel):
    """``POST /v1/embeddings`` as OpenAI defines it, plus ``input_type`` / ``instruction``.

    The side is ``input_type`` when given, else ``document`` when ``model`` ends with ``:document``
    (so an unmodified OpenAI client picks it by model name), else ``query``. Inputs are embedded as
    sent: a client that formats its own instruction (like ``care bench`` with ``openai:...``) gets no
    second one.
    """

    model_config = ConfigDict(extra="allow")

    input: str | list[str] = Field(..., description="Text or list of texts (token arrays are not accepted).")
    model: str = Field("care", description="Any name; a ':document' suffix selects the document side.")
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(None, ge=1, description="Matryoshka width: keep the first N coordinates, re-normalised.")
    input_type: Side | None = Field(None, description="'query' or 'document' (overrides the model-name suffix).")
    instruction: str | None = Field(None, description="Optional task instruction applied to query inputs.")
    user: str | None = None


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


class Health(BaseModel):
    status: Literal["ok"]
    documents: int
    dim: int
    index: dict[str, Any]
    query_encoder: str
    document_encoder: str | None
    model_matches_index: bool
