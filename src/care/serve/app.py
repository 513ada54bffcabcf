"""The FastAPI application: ``/search``, ``/embed``, ``/v1/embeddings``, ``/v1/models``, ``/health``, ``/metrics``
and a web page.

Build it with :func:`create_app` from a loaded :class:`~care.serve.engine.SearchEngine` (start-up
checks happen there); run it with uvicorn (``care serve``). Every error is JSON
``{"detail": "<what is wrong and how to fix it>"}``: 401 bad or missing API key (checked before the
body is read), 413 a body over ``max_body_bytes``, 422 invalid input (a body that is not UTF-8 or
not complete JSON, empty, invisible or over-long text, a lone surrogate or NUL, k out of range, an
over-long instruction or filter), 415 a body declared as something other than JSON, 408 a body that
did not arrive within ``body_timeout_s``, 404 a ``model`` the service does not serve, 503 overloaded
(retry), 400 a side that is not loaded. A client that hangs up mid-request is counted as 499, never 5xx.
Cross-origin browser calls are allowed only from ``ServeConfig.cors_origins``. A request
that still makes the model fail is answered alone (500) and never fails the requests batched with it.
``POST /search`` is answered by a plain ASGI layer (:mod:`care.serve.search_path`) with the same
checks and handler as its FastAPI route, which stays as the documented schema (``ServeConfig.fast_search``).
"""

from __future__ import annotations

import base64
import logging
import os
import time
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

import numpy as np
from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.middleware.cors import CORSMiddleware

from care.errors import CareError
from care.serve.batcher import MicroBatcher, QueueFullError
from care.serve.body_deadline import BodyDeadline
from care.serve.engine import EMBED, SEARCH, SearchEngine, usage_tokens
from care.serve.front import FrontDoorApp, Layer, wrap_layers
from care.serve.guard import RequestGuard
from care.serve.metrics import SEARCH_TIMING, SERVER_TIMING, RequestMetrics, ServiceMetrics, server_timing_value
from care.serve.schemas import (
    EmbedRequest,
    EmbedResponse,
    Health,
    OpenAIEmbedding,
    OpenAIEmbeddingRequest,
    OpenAIEmbeddingResponse,
    OpenAIModel,
    OpenAIModelList,
    OpenAIUsage,
    SearchRequest,
    SearchResponse,
)
from care.serve.search_path import RETRY_AFTER_S, SearchFastPath, SearchHandler, validation_detail

logger = logging.getLogger(__name__)

DOCUMENT_MODEL_SUFFIX = ":document"
#: The JSON endpoints: API key, body size and body encoding are checked before they read anything.
GUARDED_PATHS = ("/search", "/embed", "/v1/embeddings")
#: Paths counted under their own name in the request metrics (anything else is "other").
COUNTED_ROUTES = ("/search", "/embed", "/v1/embeddings", "/v1/models", "/health", "/metrics", "/")
#: What a browser on an allowed origin may send cross-origin (CORS): the API's methods and headers.
CORS_METHODS = ("GET", "POST")
CORS_HEADERS = ("content-type", "authorization", "x-api-key")


def _static_dir() -> str:
    return str(resources.files("care.serve") / "static")


def _read_api_key(env: str | None) -> str | None:
    if env is None:
        return None
    key = os.environ.get(env, "")
    if not key:
        raise CareError(f"--api-key-env {env}: the environment variable {env} is not set or empty; export the key there")
    return key


def _texts(value: str | list[str], what: str, engine: SearchEngine) -> list[str]:
    texts = [value] if isinstance(value, str) else list(value)
    limits = engine.config
    if not texts:
        raise HTTPException(422, f"{what} is an empty list; send at least one text")
    if len(texts) > limits.max_inputs:
        raise HTTPException(422, f"{what} has {len(texts)} texts; at most {limits.max_inputs} per request")
    for i, text in enumerate(texts):
        if not text.strip():
            raise HTTPException(422, f"{what}[{i}] is empty; send some text")
        if len(text) > limits.max_query_chars:
            raise HTTPException(422, f"{what}[{i}] has {len(text)} characters; at most {limits.max_query_chars}")
    return texts


def served_models(config_name: str, has_document_side: bool) -> list[str]:
    """The ``model`` names ``/v1/embeddings`` accepts and ``/v1/models`` lists: the query side under
    ``ServeConfig.model_name`` and, when a document encoder is loaded, the document side under that name
    plus ``:document``."""
    return [config_name, *([config_name + DOCUMENT_MODEL_SUFFIX] if has_document_side else [])]


def cheap_enough_inline(key: tuple, items: list[Any], max_items: int) -> bool:
    """Batcher work that may run on the event loop when the service is idle: a search or query-side
    embedding of at most ``max_items`` texts (``ServeConfig.inline_max_items``); never the document side."""
    if len(items) > max_items:
        return False
    return key[0] == SEARCH or (key[0] == EMBED and key[1] == "query")


def create_app(engine: SearchEngine) -> FrontDoorApp:
    """The service around ``engine`` (see the module docstring for the endpoints)."""
    config = engine.config
    metrics = ServiceMetrics()
    metrics.documents.set(engine.bundle.manifest.n_docs)
    api_key = _read_api_key(config.api_key_env)
    models = served_models(config.model_name, engine.document_encoder is not None)
    started = int(time.time())
    batcher = MicroBatcher(engine.process, max_batch_size=config.max_batch_size, max_wait_s=config.max_wait_ms / 1000,
                           max_queue=config.max_queue, on_batch=metrics.observe_batch,
                           inline=lambda key, items: cheap_enough_inline(key, items, config.inline_max_items))

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        await batcher.start()
        try:
            yield
        finally:
            await batcher.stop()

    app = FrontDoorApp(
        title="CARE search service",
        description="Chinese medical retrieval with an asymmetric encoder: a small query encoder online, "
        "documents encoded offline by the large encoder. Errors are JSON {\"detail\": message}.",
        version="1",
        lifespan=lifespan,
    )
    app.state.engine, app.state.metrics, app.state.batcher = engine, metrics, batcher

    @app.exception_handler(RequestValidationError)
    async def invalid_body(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": validation_detail(exc.errors())})

    @app.exception_handler(QueueFullError)
    async def overloaded(_: Request, exc: QueueFullError) -> JSONResponse:
        return JSONResponse(status_code=503, content={"detail": str(exc)}, headers={"Retry-After": str(RETRY_AFTER_S)})

    async def run(key: tuple, items: list[Any]) -> list[Any]:
        try:
            return await batcher.submit(key, items)
        except QueueFullError:
            raise
        except CareError as exc:
            raise HTTPException(400, str(exc)) from None
        except Exception as exc:  # noqa: BLE001 - only this request failed (the batcher isolates it)
            logger.exception("the encoder failed on one request")
            raise HTTPException(500, f"the encoder failed on this request ({type(exc).__name__}: {exc}); "
                                     "other requests are not affected") from None

    searcher = SearchHandler(engine, run, _texts)

    @app.post("/search", response_model=SearchResponse,
              summary="Search the index with one query")
    async def search(body: SearchRequest) -> Response:
        # documents the endpoint; with config.fast_search, SearchFastPath below answers instead, with the same handler
        answer, took_ms = await searcher.answer(body)
        headers = {SERVER_TIMING: server_timing_value(SEARCH_TIMING, took_ms)} if config.server_timing else None
        return Response(answer, media_type="application/json", headers=headers)

    @app.post("/embed", response_model=EmbedResponse,
              summary="Embed texts on the query or document side")
    async def embed(body: EmbedRequest) -> EmbedResponse:
        texts = _texts(body.inputs, "inputs", engine)
        if body.side == "document" and engine.document_encoder is None:
            raise HTTPException(400, "side='document' needs the document encoder: start the service with --document-model")
        rows = await run((EMBED, body.side, body.instruction, False), texts)
        return EmbedResponse(embeddings=[np.asarray(r).tolist() for r in rows], dim=engine.dim, side=body.side)

    @app.post("/v1/embeddings", response_model=OpenAIEmbeddingResponse,
              summary="OpenAI-compatible embeddings")
    async def openai_embeddings(body: OpenAIEmbeddingRequest) -> OpenAIEmbeddingResponse:
        model = body.model if body.model is not None else models[0]
        if model not in models:
            raise HTTPException(404, f"model {model!r} is not served here; this service serves {models} "
                                     "(GET /v1/models lists them)")
        texts = _texts(body.input, "input", engine)
        side = body.input_type or ("document" if model.endswith(DOCUMENT_MODEL_SUFFIX) else "query")
        if side == "document" and engine.document_encoder is None:
            raise HTTPException(400, "document embeddings need the document encoder: start the service with --document-model")
        if body.dimensions is not None and body.dimensions > engine.dim:
            raise HTTPException(422, f"dimensions={body.dimensions} is larger than the model's {engine.dim}")
        rows = np.asarray(await run((EMBED, side, body.instruction, True), texts), dtype=np.float32)
        if body.dimensions is not None:
            from care.encoders.vectors import truncate_and_normalize

            rows = truncate_and_normalize(rows, body.dimensions)
        data = []
        for i, row in enumerate(rows):
            value: list[float] | str = (base64.b64encode(row.astype("<f4").tobytes()).decode()
                                        if body.encoding_format == "base64" else row.tolist())
            data.append(OpenAIEmbedding(index=i, embedding=value))
        tokens = usage_tokens(texts)
        usage = OpenAIUsage(prompt_tokens=tokens, total_tokens=tokens)
        return OpenAIEmbeddingResponse(data=data, model=model, usage=usage)

    @app.get("/v1/models", response_model=OpenAIModelList, summary="OpenAI-compatible list of the served sides")
    async def openai_models() -> OpenAIModelList:
        return OpenAIModelList(data=[OpenAIModel(id=name, created=started) for name in models])

    @app.get("/v1/models/{model}", response_model=OpenAIModel, summary="One served side (OpenAI-compatible)")
    async def openai_model(model: str) -> OpenAIModel:
        if model not in models:
            raise HTTPException(404, f"model {model!r} is not served here; this service serves {models}")
        return OpenAIModel(id=model, created=started)

    @app.get("/health", response_model=Health, summary="Liveness and what is loaded")
    async def health() -> Health:
        manifest = engine.bundle.manifest
        return Health(status="ok", documents=manifest.n_docs, dim=manifest.dim, index=manifest.index,
                      query_encoder=engine.query_encoder.name,
                      document_encoder=engine.document_encoder.name if engine.document_encoder else None,
                      index_model=manifest.model, model_matches_index=engine.model_matches_index)

    @app.get("/metrics", summary="Prometheus metrics", response_class=Response)
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type=metrics.content_type)

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(os.path.join(_static_dir(), "index.html"))

    app.mount("/static", StaticFiles(directory=_static_dir()), name="static")
    # middleware added later wraps the earlier: metrics -> body deadline -> CORS -> guard -> the /search hot path
    # -> FastAPI's routes, so the guard's and the deadline's answers are counted, a CORS preflight is answered
    # before the API key is asked for (browsers send none with it), and /search is checked (key, type, size,
    # JSON) before it is answered
    layers: list[Layer] = []  # innermost first
    if config.fast_search:
        layers.append((SearchFastPath, {"handler": searcher, "path": "/search", "server_timing": config.server_timing,
                                        "lean": config.lean_search}))
    layers.append((RequestGuard, {"paths": GUARDED_PATHS, "api_key": api_key, "max_body_bytes": config.max_body_bytes,
                                  "parse_once": config.fast_search and config.lean_search}))
    if config.cors_origins:
        layers.append((CORSMiddleware, {"allow_origins": list(config.cors_origins), "allow_methods": list(CORS_METHODS),
                                        "allow_headers": list(CORS_HEADERS),
                                        "expose_headers": ["server-timing", "retry-after"]}))
    layers.append((BodyDeadline, {"timeout_s": config.body_timeout_s, "on_timeout": metrics.observe_timeout}))
    layers.append((RequestMetrics, {"metrics": metrics, "routes": COUNTED_ROUTES, "queue_depth": lambda: batcher.pending,
                                    "server_timing": config.server_timing}))
    for cls, kwargs in layers:
        app.add_middleware(cls, **kwargs)
    if config.fast_search and config.search_in_front:  # the same layers once more, straight from the server
        app.front = wrap_layers(app.router, layers)
    return app
