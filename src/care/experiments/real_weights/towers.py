"""e5's conventions in the real-weights experiment: spec options, the query tower's depth, cuts and narrowed towers.

- :func:`e5_spec` / :func:`model_spec`: e5 (or a folder trained from it) as a model spec, with e5's ``query: `` /
  ``passage: `` prefixes and no task instructions;
- :func:`e5_cuts` / :func:`e5_narrow` / :func:`narrowed`: e5 cut to strided layers (``care model prune``), with its
  feed-forward blocks narrowed (``care model prune --ffn-width``), each written once;
- :func:`ensure_e5`: the exported e5 folder, exported when missing (``care model export-e5``);
- :func:`length_settings`: a training token budget as typed stage settings; :func:`setting_texts`: settings as the
  records show them.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote

from care.bench.reports.paths import ROOT
from care.data.io import iter_jsonl
from care.models.e5_export import PASSAGE_PREFIX, QUERY_PREFIX
from care.train.recipes.presets import preset_dir
from care.train.stage_settings import StageSetting

#: The stage configs ``care train recipe`` / ``care run`` use for e5 document towers.
CONFIGS = preset_dir("e5")
#: The embedded demo benchmark: every row is also scored on it zero-shot (``--travel``'s default).
DEMO_RETRIEVAL = ROOT / "src" / "care" / "demo" / "data" / "CMedTEB-Demo-Retrieval"
#: e5's spec options: its prefixes, no task instructions.
E5_OPTIONS = f"query_prefix={quote(QUERY_PREFIX)}&document_prefix={quote(PASSAGE_PREFIX)}&instructions=false"
#: The query tower's depth (``--layers``): e5 cut to 6 strided layers, as the table's CARE row.
QUERY_LAYERS = 6
#: The fields a training token budget sets (``--max-length``; the e5 preset says 192).
LENGTH_KEYS = ("model.query_max_seq_length", "model.document_max_seq_length")


def e5_spec(path: Path | str, dtype: str | None) -> str:
    """e5 at ``path`` as a model spec: mean pooling, e5's prefixes, no instructions, ``dtype`` when given."""
    return f"{path}?pooling=mean&{E5_OPTIONS}" + (f"&dtype={dtype}" if dtype else "")


def model_spec(folder: str | Path) -> str:
    """A trained e5 folder encoded as trained: e5's prefixes, no task instructions, float32."""
    return f"{folder}?{E5_OPTIONS}&dtype=float32"


def ensure_e5(folder: Path) -> Path:
    """The exported e5 folder ``folder`` (``--e5``), written with ``care model export-e5`` when missing."""
    if (folder / "config.json").is_file():
        return folder
    from care.models.e5_export import export_e5

    return export_e5(folder)


def e5_cuts(e5: Path, layers: int, work: Path) -> Path:
    """e5 cut to ``layers`` strided layers (care model prune --keep strided), once, under ``work``."""
    from care.models.prune import prune_layers

    out = work / f"e5-L{layers}-strided"
    if not out.is_dir():
        prune_layers(e5, layers, out, keep="strided")
    return out


def e5_narrow(e5: Path, layers: int, width: int, work: Path, texts_file: Path | None = None) -> Path:
    """e5 cut to ``layers`` strided layers with every feed-forward block narrowed to ``width`` neurons (care model
    prune --ffn-width), the neurons ranked on the queries of ``texts_file`` (weights only without it), once."""
    out = work / f"e5-L{layers}-strided-ffn{width}{'-queries' if texts_file else ''}"
    return narrowed(e5_cuts(e5, layers, work), width, out, texts_file) if not out.is_dir() else out


def narrowed(model: Path, width: int, out: Path, texts_file: Path | None = None) -> Path:
    """``model`` with every feed-forward block narrowed to ``width`` neurons (care model prune --ffn-width), written
    to ``out`` once; the neurons ranked on the queries of the training file ``texts_file`` (by weights only
    without it: enough where only the shape matters, as for timing)."""
    from care.models.ffn_prune import prune_ffn

    if not out.is_dir():
        prune_ffn(model, width, out, texts=[r["query"] for _, r in iter_jsonl(texts_file)] if texts_file else [])
    return out


def length_settings(max_length: int | None) -> tuple[StageSetting, ...]:
    """Both towers' token budget in training as stage settings (every stage); none without ``max_length``."""
    return tuple(StageSetting(key, max_length) for key in LENGTH_KEYS) if max_length else ()


def setting_texts(settings: Iterable[StageSetting]) -> list[str]:
    """``settings`` as a record shows them: ``[stage:]key=value`` each."""
    return [(f"{s.stage}:" if s.stage else "") + f"{s.key}={s.value}" for s in settings]
