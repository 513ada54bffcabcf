"""CARE: one sentence-transformers model with a small query route and a large document route.

Asymmetry is a routing module, not a new model class: ``Router.for_query_document`` holds the query
tower (BERT, CLS pooling) and the document tower (LLM, last-token pooling, LoRA, Matryoshka cut), and
``SentenceTransformer.encode_query`` / ``encode_document`` pick the route. A saved folder therefore
loads with plain ``SentenceTransformer(path)`` (and evaluates in mteb); ``care_config.json`` in the
folder records the CARE-specific facts (widths, pooling, LoRA, instruction template).

Folder layout written by :func:`save_care_model`::

    path/
      modules.json, config_sentence_transformers.json (prompts), router_config.json, README.md
      query_0_Transformer/  query_1_Pooling/  query_2_Normalize/
      document_0_Transformer/ (full weights; LoRA, if any, merged in)
      document_1_Pooling/  [document_2_Dense/ (Matryoshka cut)]  document_N_Normalize/
      care_config.json
      document_lora_adapter/  (unless merge_lora=True: the peft adapter + the name of its base model,
                               so training can resume on the un-merged base: load_care_model(resume_lora=True))

Why the document weights are always merged in the routed folder: transformers resolves a peft adapter
stored in a *sub-folder* against its base model with that same sub-folder appended, so an adapter-only
route would not load with ``SentenceTransformer(path)``. Merged weights load everywhere (mteb too); the
adapter is kept beside them for training.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sentence_transformers import SentenceTransformer
from sentence_transformers.base.modules import Router
from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

from care.config import build
from care.data.io import write_json
from care.errors import CareError, DimensionMismatchError
from care.models.folders import atomic_dir
from care.models.instructions import (
    DEFAULT_TASK,
    PAPER_INSTRUCTION_TEMPLATE,
    build_prompts,
    query_prompt_name,
)
from care.models.lora import has_lora, lora_merged, lora_settings_of, mark_only_lora_trainable
from care.models.matryoshka import freeze_truncation, is_matryoshka_truncation

logger = logging.getLogger(__name__)

CARE_CONFIG_FILENAME = "care_config.json"
LORA_ADAPTER_DIRNAME = "document_lora_adapter"
CARE_FORMAT_VERSION = 1
QUERY_ROUTE = "query"
DOCUMENT_ROUTE = "document"


@dataclass(frozen=True)
class CareConfig:
    """What a CARE folder records beyond the sentence-transformers modules (``care_config.json``)."""

    query_dim: int
    document_native_dim: int
    output_dim: int
    query_pooling: str
    document_pooling: str
    lora: dict[str, Any] | None
    lora_adapter: str | None
    instruction_template: str
    default_task: str | None
    query_base_model: str | None = None
    document_base_model: str | None = None
    format_version: int = CARE_FORMAT_VERSION

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, source: str = CARE_CONFIG_FILENAME) -> CareConfig:
        return build(cls, data, source=source)


# --------------------------------------------------------------------------------------------- pieces
def _router(model: SentenceTransformer) -> Router:
    router = model[0] if len(model) else None
    if not isinstance(router, Router) or set(router.sub_modules) != {QUERY_ROUTE, DOCUMENT_ROUTE}:
        raise CareError(
            "not a CARE model: expected a sentence-transformers model whose first module is a Router with "
            f"'{QUERY_ROUTE}' and '{DOCUMENT_ROUTE}' routes (build it with care.models.build_care_model)"
        )
    return router


def _first(modules, cls):
    return next((m for m in modules if isinstance(m, cls)), None)


def _output_dim(modules) -> int:
    for module in reversed(list(modules)):
        if hasattr(module, "get_embedding_dimension"):
            dim = module.get_embedding_dimension()
            if dim:
                return int(dim)
    raise CareError("cannot tell the output width of a tower: it has no Pooling / Dense / Transformer module")


def _describe_tower(modules) -> tuple[int, str, str | None]:
    """(native width, pooling mode, base model name) of one tower."""
    transformer = _first(modules, Transformer)
    pooling = _first(modules, Pooling)
    native = transformer.get_embedding_dimension() if transformer is not None else _output_dim(modules)
    mode = pooling.pooling_mode if pooling is not None else "none"
    base = None
    if transformer is not None:
        peft_config = (getattr(transformer.auto_model, "peft_config", None) or {}).get("default")
        base = getattr(peft_config, "base_model_name_or_path", None) or transformer.auto_model.name_or_path
    return int(native), str(mode), base


def check_dimensions(query_modules, document_modules) -> int:
    """The shared width; raises :class:`DimensionMismatchError` when the towers disagree."""
    query_dim, document_dim = _output_dim(query_modules), _output_dim(document_modules)
    if query_dim != document_dim:
        raise DimensionMismatchError(
            f"query encoder gives {query_dim}-d vectors but the document encoder gives {document_dim}-d; "
            f"build the document encoder with output_dim={query_dim} (Matryoshka cut) so both share one space"
        )
    return query_dim


# --------------------------------------------------------------------------------------------- API
def build_care_model(
    query: SentenceTransformer,
    document: SentenceTransformer,
    *,
    prompts: dict[str, str] | None = None,
    default_prompt_name: str | None = DEFAULT_TASK,
    instruction_template: str = PAPER_INSTRUCTION_TEMPLATE,
) -> SentenceTransformer:
    """Combine two towers into one routed CARE model (modules are shared, not copied).

    Args:
        query: the query tower (:func:`care.models.query.build_query_encoder`).
        document: the document tower (:func:`care.models.document.build_document_encoder`), already
            cut to the query width (``output_dim=query.get_embedding_dimension()``).
        prompts: task name -> instruction text (None: the CMedTEB instructions and mteb task types).
            Stored as query-only prompts ``"{task}-query"``; see :mod:`care.models.instructions`.
        default_prompt_name: task whose instruction ``encode_query`` applies by default (None: none).
        instruction_template: must contain ``{instruction}`` and end with ``{query}``.
    Returns:
        ``SentenceTransformer([Router(query=..., document=...)])`` with cosine similarity.
    Raises:
        DimensionMismatchError: the towers' output widths differ.
    """
    query_modules, document_modules = list(query.children()), list(document.children())
    check_dimensions(query_modules, document_modules)
    default_task = default_prompt_name[: -len("-query")] if default_prompt_name and default_prompt_name.endswith("-query") else default_prompt_name
    st_prompts = build_prompts(prompts, default_task=default_task, template=instruction_template)
    router = Router.for_query_document(query_modules=query_modules, document_modules=document_modules)
    model = SentenceTransformer(modules=[router], prompts=st_prompts, similarity_fn_name="cosine")
    model.care_config = describe_care_model(model, default_task=default_task, instruction_template=instruction_template)
    return model


def describe_care_model(
    model: SentenceTransformer,
    *,
    default_task: str | None = None,
    instruction_template: str | None = None,
    keep_lora_adapter: bool = True,
) -> CareConfig:
    """Derive the :class:`CareConfig` of a routed model from its modules (no width is hard-coded)."""
    router = _router(model)
    query_modules, document_modules = router.sub_modules[QUERY_ROUTE], router.sub_modules[DOCUMENT_ROUTE]
    output_dim = check_dimensions(query_modules, document_modules)
    query_native, query_pooling, query_base = _describe_tower(query_modules)
    document_native, document_pooling, document_base = _describe_tower(document_modules)
    transformer = _first(document_modules, Transformer)
    settings = lora_settings_of(transformer.auto_model) if transformer is not None and has_lora(transformer.auto_model) else None
    previous: CareConfig | None = getattr(model, "care_config", None)
    if settings is None and previous is not None:
        lora, document_base = previous.lora, previous.document_base_model  # LoRA merged at load: keep provenance
    else:
        lora = settings.to_dict() if settings else None
    if default_task is None and previous is not None:
        default_task = previous.default_task
    return CareConfig(
        query_dim=query_native,
        document_native_dim=document_native,
        output_dim=output_dim,
        query_pooling=query_pooling,
        document_pooling=document_pooling,
        lora=lora,
        lora_adapter=LORA_ADAPTER_DIRNAME if settings is not None and keep_lora_adapter else None,
        instruction_template=instruction_template
        or (previous.instruction_template if previous is not None else PAPER_INSTRUCTION_TEMPLATE),
        default_task=default_task,
        query_base_model=query_base,
        document_base_model=document_base,
    )


def save_care_model(model: SentenceTransformer, path: str | Path, *, merge_lora: bool = False) -> Path:
    """Save a CARE model as one folder, atomically (written to a temporary sibling, then renamed).

    The routed folder always holds the document weights with LoRA merged in, so plain
    ``SentenceTransformer(path)`` loads it anywhere (see the module docstring).

    Args:
        model: a model from :func:`build_care_model` / :func:`load_care_model`.
        path: target folder; an existing folder is replaced only once the new one is complete.
        merge_lora: True writes only the merged model (no peft, no base-model reference needed);
            False also keeps the LoRA adapter in ``document_lora_adapter/`` so that
            ``load_care_model(path, resume_lora=True)`` continues training the adapter on the base.
            The in-memory model keeps its adapter either way.
    Returns:
        The folder path.
    """
    path = Path(path)
    router = _router(model)
    transformer = _first(router.sub_modules[DOCUMENT_ROUTE], Transformer)
    with_lora = transformer is not None and has_lora(transformer.auto_model)
    config = describe_care_model(model, keep_lora_adapter=not merge_lora)
    with atomic_dir(path) as tmp:
        if with_lora:
            with lora_merged(transformer.auto_model):
                model.save(str(tmp))
            if not merge_lora:
                transformer.save(str(tmp / LORA_ADAPTER_DIRNAME))
        else:
            model.save(str(tmp))
        write_json(tmp / CARE_CONFIG_FILENAME, config.to_dict())
    logger.info("saved CARE model (%d-d, LoRA %s) to %s", config.output_dim,
                "none" if not with_lora else ("merged only" if merge_lora else "merged + adapter"), path)
    return path


def read_care_config(path: str | Path) -> CareConfig:
    """Read ``care_config.json`` from a CARE folder."""
    file = Path(path) / CARE_CONFIG_FILENAME
    if not file.is_file():
        raise CareError(f"{path} is not a CARE model folder: {CARE_CONFIG_FILENAME} is missing (save it with save_care_model)")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CareError(f"{file}: malformed JSON ({exc.msg} at line {exc.lineno})") from None
    return CareConfig.from_dict(data, source=str(file))


def load_care_model(
    path: str | Path, *, resume_lora: bool = False, trainable: bool = True, **kwargs: Any
) -> SentenceTransformer:
    """``SentenceTransformer(path)`` plus CARE checks; ready to evaluate or to keep training.

    Checks that the routes exist and that the widths recorded in ``care_config.json`` match the
    modules; keeps the Matryoshka cut frozen.

    Args:
        path: a folder written by :func:`save_care_model`.
        resume_lora: replace the merged document weights by base model + the saved LoRA adapter
            (``document_lora_adapter/``; the base model named in it must be available) so training
            continues on the adapter; only adapter parameters are then trainable in that tower
            (when ``trainable``).
        trainable: with ``resume_lora``, mark the adapter trainable.
        kwargs: passed to ``SentenceTransformer`` (``device=``, ``model_kwargs=``, ``trust_remote_code=``).
    Raises:
        CareError: not a CARE folder, or ``resume_lora`` without a saved adapter.
        DimensionMismatchError: the modules disagree with the recorded widths.
    """
    path = Path(path)
    if not path.is_dir():
        raise CareError(f"CARE model folder {path} does not exist")
    config = read_care_config(path)
    model = SentenceTransformer(str(path), **kwargs)
    router = _router(model)
    model.care_config = config
    found = describe_care_model(model)
    for field in ("query_dim", "document_native_dim", "output_dim"):
        if getattr(found, field) != getattr(config, field):
            raise DimensionMismatchError(
                f"{path}: {CARE_CONFIG_FILENAME} records {field}={getattr(config, field)} but the saved modules give "
                f"{getattr(found, field)}; the folder was modified after saving — re-save it with save_care_model"
            )
    document_modules = router.sub_modules[DOCUMENT_ROUTE]
    for module in document_modules:
        if is_matryoshka_truncation(module):
            freeze_truncation(module)
    if resume_lora:
        if not config.lora_adapter:
            raise CareError(
                f"{path} keeps no LoRA adapter (saved with merge_lora=True, or trained without LoRA); "
                "add a fresh adapter to the document tower instead"
            )
        adapter_dir = path / config.lora_adapter
        if not (adapter_dir / "adapter_config.json").is_file():
            raise CareError(f"{adapter_dir}: adapter_config.json is missing; the folder is incomplete — re-save it")
        old = _first(document_modules, Transformer)
        adapter_transformer = Transformer.load(str(adapter_dir), **_transformer_load_kwargs(kwargs))
        adapter_transformer.tokenizer.padding_side = old.tokenizer.padding_side
        adapter_transformer.to(old.auto_model.device)
        index = next(i for i, module in enumerate(document_modules) if module is old)
        document_modules[index] = adapter_transformer
        if trainable:
            mark_only_lora_trainable(adapter_transformer.auto_model)
    return model


def _transformer_load_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    keys = ("model_kwargs", "processor_kwargs", "config_kwargs", "trust_remote_code")
    return {k: v for k, v in kwargs.items() if k in keys}


def split_care_model(model: SentenceTransformer) -> tuple[SentenceTransformer, SentenceTransformer]:
    """The two towers as standalone ``SentenceTransformer`` models sharing the CARE model's modules.

    Training a returned tower trains the CARE model's route (same parameters); re-combine with
    :func:`build_care_model` (pass ``prompts=instructions_from_prompts(model.prompts)`` to keep
    custom instructions).
    """
    router = _router(model)
    query = SentenceTransformer(modules=list(router.sub_modules[QUERY_ROUTE]))
    document = SentenceTransformer(modules=list(router.sub_modules[DOCUMENT_ROUTE]))
    return query, document


def query_prompt_for_task(model: SentenceTransformer, task_name: str) -> str | None:
    """The prompt name ``encode_query`` should use for ``task_name`` (None if the model has none)."""
    name = query_prompt_name(task_name)
    return name if name in model.prompts else None
