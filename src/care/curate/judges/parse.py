"""Robust parsing of a judge's reply into grades.

Accepts what chat models really send: a JSON array or object, inside a code fence or after some
prose, followed by trailing text; objects keyed ``id``/``index``/``passage``, or a mapping
``{"1": "S"}``; grades such as ``"S"``, ``"s"``, ``"S级"``. Returns only the passages it could
read, so the caller re-asks for the missing ones.
"""

from __future__ import annotations

import json
import re
from typing import Any

from care.curate.judges.base import GRADES

ID_KEYS = ("id", "index", "passage", "passage_id", "pid", "编号", "段落编号")
GRADE_KEYS = ("grade", "label", "rating", "relevance", "score", "等级", "相关性")
LIST_KEYS = ("judgments", "results", "grades", "items", "data", "answers")
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_PAIR = re.compile(r'"?(?:id|index)"?\s*[:：]\s*"?(\d+)"?\s*,\s*"?(?:grade|label)"?\s*[:：]\s*"([SABCDsabcd])', re.IGNORECASE)


def normalise_grade(value: Any) -> str | None:
    """``"S"``, ``"s"``, ``"S级"``, ``" A "`` -> the grade letter; anything else -> None."""
    if not isinstance(value, str):
        return None
    value = value.strip().upper()
    if value and value[0] in GRADES and (len(value) == 1 or not ("A" <= value[1] <= "Z")):
        return value[0]
    return None


def _json_values(text: str) -> list[Any]:
    """Every JSON value that starts at a ``[`` or ``{`` in ``text`` (code-fenced content first)."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    values = []
    for cand in candidates:
        for i, ch in enumerate(cand):
            if ch in "[{":
                try:
                    value, _ = decoder.raw_decode(cand, i)
                except json.JSONDecodeError:
                    continue
                values.append(value)
    return values


def _items(value: Any) -> list[tuple[Any, Any]]:
    if isinstance(value, dict):
        for key in LIST_KEYS:
            if isinstance(value.get(key), list):
                return _items(value[key])
        if any(k in value for k in ID_KEYS):
            return _items([value])
        return list(value.items())
    if isinstance(value, list):
        out = []
        for item in value:
            if isinstance(item, dict):
                pid = next((item[k] for k in ID_KEYS if k in item), None)
                grade = next((item[k] for k in GRADE_KEYS if k in item), None)
                out.append((pid, grade))
        return out
    return []


def parse_grades(reply: str, n_passages: int) -> dict[int, str]:
    """Map 0-based passage positions to grades for every passage the reply grades validly.

    Passage ids in the reply are 1-based (as numbered in the prompt); ids out of range, unknown
    grades and duplicates (after the first) are ignored.
    """
    grades: dict[int, str] = {}
    for value in _json_values(reply or ""):
        for pid, grade in _items(value):
            try:
                index = int(str(pid).strip().strip("[]")) - 1
            except (TypeError, ValueError):
                continue
            letter = normalise_grade(grade)
            if letter and 0 <= index < n_passages and index not in grades:
                grades[index] = letter
    for m in _PAIR.finditer(reply or ""):  # a truncated array: read the complete objects
        index = int(m.group(1)) - 1
        if 0 <= index < n_passages and index not in grades:
            grades[index] = m.group(2).upper()
    return grades
