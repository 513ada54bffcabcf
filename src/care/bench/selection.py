"""The selection protocol: how a record says what it chose, on which split, among which candidates.

Anything chosen by a score (a learning rate, epochs, a variant, a preset default, the query tower a latency budget
picks) is chosen on a validation split carved from the training file by query component
(:func:`care.train.recipes.validation.carve_validation`); the test split is read once, for the table. A choice is kept in the
record that made it, and in every record that reports a setting so chosen, as a list under
``extra.selection`` (:data:`SELECTION_KEY`), one :class:`Selection` per chosen setting::

    {"setting": "stage1 optim.lr", "selected_on": "validation", "metric": "ndcg_at_10",
     "candidates": {"2e-4": 0.241, "2.4e-3": 0.270}, "chosen": "2.4e-3",
     "record": "real_weights/stage1_probe_validation_L1_seed0", "rows": ["CARE"], "note": ""}

``selected_on`` is one of :data:`SELECTED_ON`: ``validation``; ``speed`` (a latency budget's pick: measured speed-ups,
no quality score at all); or ``test`` — allowed only where the caller asked for it explicitly
(:func:`selection_split`: ``--select-on-test``), and then every table generated from the record marks the rows the
choice touched with :data:`TEST_MARK` (:func:`with_test_mark`) and says why (:data:`TEST_FOOTNOTE`).
``tests/bench/test_selection_records.py`` holds every record under ``benchmarks/results/`` to this.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from care.errors import CareError

#: The splits (or measurements) a choice can be made on.
VALIDATION, TEST, SPEED = "validation", "test", "speed"
SELECTED_ON: tuple[str, ...] = (VALIDATION, TEST, SPEED)
#: Where a record keeps its selections (``record.extra[SELECTION_KEY]``: a list of :meth:`Selection.to_dict`).
SELECTION_KEY = "selection"
#: The flag that lets a script select on the test split (and marks what it writes).
SELECT_ON_TEST_FLAG = "--select-on-test"
#: The mark a table puts beside a figure whose settings were chosen on the test split it reports.
TEST_MARK = "†"
#: What the mark means, said once under (or inside) a table that shows it.
TEST_FOOTNOTE = (f"{TEST_MARK} a setting of this row was chosen on the test split it reports (pending re-selection "
                 "on validation)")


@dataclass
class Selection:
    """One chosen setting.

    Attributes:
        setting: what was chosen (``stage1 optim.lr``, ``variant``, ``query tower depth``).
        selected_on: one of :data:`SELECTED_ON`.
        chosen: the candidate chosen (its name as in ``candidates``).
        candidates: every candidate's score on ``selected_on`` (``{name: score}``; a speed-up for ``speed``).
        metric: what ``candidates`` holds (``ndcg_at_10``, ``int8 speed-up``).
        record: the record that chose it (``<experiment>/<name>`` under ``benchmarks/results/``, or a run's file);
            empty: this record.
        rows: the rows of this record whose figures depend on the choice (empty: every row).
        note: anything a reader must know (how it was chosen, where the candidates' scores live).
    """

    setting: str
    selected_on: str
    chosen: str
    candidates: dict[str, float] = field(default_factory=dict)
    metric: str = ""
    record: str = ""
    rows: list[str] = field(default_factory=list)
    note: str = ""

    def __post_init__(self) -> None:
        if self.selected_on not in SELECTED_ON:
            raise CareError(f"selection of {self.setting!r}: selected_on must be one of {', '.join(SELECTED_ON)}, "
                            f"got {self.selected_on!r}")
        if not self.setting or not self.chosen:
            raise CareError(f"a selection needs a setting and the candidate chosen, got {self.setting!r} / "
                            f"{self.chosen!r}")
        if self.candidates and self.chosen not in self.candidates:
            raise CareError(f"selection of {self.setting!r}: the chosen {self.chosen!r} is not among the candidates "
                            f"({', '.join(self.candidates)})")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], source: str = "selection") -> Selection:
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise CareError(f"{source}: unknown selection field(s) {', '.join(unknown)}; known: {', '.join(known)}")
        try:
            return cls(**dict(data))
        except TypeError as exc:
            raise CareError(f"{source}: {exc}") from None


def selection_split(split: str, *, select_on_test: bool, where: str) -> str:
    """The split a choice is about to be made on, checked: ``test`` is refused unless ``select_on_test``.

    Args:
        split: ``validation`` or ``test`` (the split the candidates are scored on).
        select_on_test: the caller was given :data:`SELECT_ON_TEST_FLAG`.
        where: the script or command, for the message.
    Raises:
        CareError: ``split`` is ``test`` without ``select_on_test``.
    """
    if split not in (VALIDATION, TEST):
        raise CareError(f"{where}: candidates are scored on validation or test, got {split!r}")
    if split == TEST and not select_on_test:
        raise CareError(f"{where}: this would choose a setting by its score on the test split it reports; score the "
                        f"candidates on validation, or pass {SELECT_ON_TEST_FLAG} to do it anyway (the record and "
                        f"every table made from it then mark the choice {TEST_MARK})")
    return split


def read_selections(extra: Mapping[str, Any], source: str = "record") -> list[Selection]:
    """The selections a record's ``extra`` holds (none when it has no :data:`SELECTION_KEY`)."""
    raw = extra.get(SELECTION_KEY) or []
    if not isinstance(raw, list):
        raise CareError(f"{source}: extra.{SELECTION_KEY} must be a list of selections, got {type(raw).__name__}")
    return [Selection.from_dict(item, f"{source}: extra.{SELECTION_KEY}[{i}]") for i, item in enumerate(raw)]


def add_selections(extra: dict[str, Any], selections: Sequence[Selection]) -> dict[str, Any]:
    """``extra`` with ``selections`` appended to its :data:`SELECTION_KEY` list (in place; returned)."""
    extra[SELECTION_KEY] = [*extra.get(SELECTION_KEY, []), *(s.to_dict() for s in selections)]
    return extra


def chosen_on_test(extra: Mapping[str, Any], row: str | None = None) -> list[Selection]:
    """The selections of a record made on test that touch ``row`` (a selection naming no rows touches every row;
    ``row=None``: every test selection)."""
    return [s for s in read_selections(extra) if s.selected_on == TEST
            and (row is None or not s.rows or row in s.rows)]


def with_test_mark(text: str | None, extra: Mapping[str, Any] | None, row: str | None = None) -> str | None:
    """``text`` with :data:`TEST_MARK` when a setting of ``row`` in the record (``extra``) was chosen on test."""
    if text is None or extra is None or not chosen_on_test(extra, row):
        return text
    return f"{text}{TEST_MARK}"
