"""Result tables in Markdown generated from benchmark records, written into marked sections of a document.

A document marks a generated section with a pair of HTML comments (invisible when rendered)::

    <!-- results:care-table -->
    ... replaced on every run ...
    <!-- /results:care-table -->

:func:`replace_sections` rewrites every marked section whose name it is given (the rest of the
document is untouched, so the prose around a table stays hand-written); :func:`markdown_table` and
:func:`mean_std` format the cells. ``benchmarks/tables.py`` says which record makes which table.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from care.data.io import atomic_write
from care.errors import CareError

MARKER = re.compile(r"<!-- results:(?P<name>[\w.-]+) -->\n(?P<body>.*?)<!-- /results:(?P=name) -->", re.S)
_OPEN = re.compile(r"<!-- results:([\w.-]+) -->")
_CLOSE = re.compile(r"<!-- /results:([\w.-]+) -->")


def section_names(text: str) -> list[str]:
    """The names of the marked sections of ``text``, in order; unbalanced markers are an error."""
    opened, closed = _OPEN.findall(text), _CLOSE.findall(text)
    if sorted(opened) != sorted(closed) or len(set(opened)) != len(opened):
        raise CareError(f"unbalanced or repeated result markers: opened {opened}, closed {closed}; "
                        "every <!-- results:NAME --> needs one <!-- /results:NAME --> after it")
    return opened


def replace_sections(text: str, sections: Mapping[str, str], *, source: str = "document") -> str:
    """``text`` with the body of every marked section named in ``sections`` replaced.

    Raises:
        CareError: unbalanced markers, or a section in ``sections`` that ``text`` does not mark.
    """
    present = section_names(text)
    missing = sorted(set(sections) - set(present))
    if missing:
        raise CareError(f"{source}: no marked section {missing}; add <!-- results:NAME --> ... <!-- /results:NAME -->")

    def body(match: re.Match[str]) -> str:
        name = match.group("name")
        if name not in sections:
            return match.group(0)
        content = sections[name].rstrip("\n") + "\n"
        return f"<!-- results:{name} -->\n{content}<!-- /results:{name} -->"

    return MARKER.sub(body, text)


def rewrite_file(path: str | Path, sections: Mapping[str, str]) -> bool:
    """Rewrite the marked sections of the file at ``path`` (atomically); returns whether it changed."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    new = replace_sections(text, sections, source=str(path))
    if new == text:
        return False
    with atomic_write(path) as fh:
        fh.write(new)
    return True


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table (cells as given, ``None`` shown as ``–``)."""
    def cell(value: object) -> str:
        return "–" if value is None else str(value)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def mean_std(scores: Mapping[str, object] | None, key: str = "ndcg_at_10", digits: int = 3,
             bold: bool = False) -> str | None:
    """``0.242 ± 0.003`` from ``{key}_mean`` / ``{key}_std`` (a single value when only ``key`` is there)."""
    if not scores:
        return None
    mean, std = scores.get(f"{key}_mean"), scores.get(f"{key}_std")
    if mean is None:
        value = scores.get(key)
        text = None if value is None or isinstance(value, list) else f"{float(value):.{digits}f}"
    else:
        text = f"{float(mean):.{digits}f}" + (f" ± {float(std):.{digits}f}" if std else "")
    return f"**{text}**" if bold and text else text


TableFunction = Callable[[Path], str]


def per_seed_ratios(row: Mapping[str, Any] | None, reference: Mapping[str, Any] | None) -> dict[int, float]:
    """``{seed: row / reference}`` of two score rows ``{"per_seed": [...], "seeds": [...]}``, for every seed both
    hold: each seed against its own reference (a ratio of means hides a seed that fell short)."""
    if not row or not reference or "seeds" not in row or "seeds" not in reference:
        return {}
    ref = dict(zip(reference["seeds"], reference["per_seed"], strict=True))
    return {seed: value / ref[seed] for seed, value in zip(row["seeds"], row["per_seed"], strict=True) if ref.get(seed)}


def ratio_cell(mean_ratio: float | None, per_seed: Sequence[float] = ()) -> str | None:
    """``97.6% (per seed 98.2, 98.2, 96.4)``: the ratio of means and, with more than one seed, each seed's."""
    if mean_ratio is None:
        return None
    seeds = f" (per seed {', '.join(f'{100 * r:.1f}' for r in per_seed)})" if len(per_seed) > 1 else ""
    return f"{mean_ratio:.1%}{seeds}"
