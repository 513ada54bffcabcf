"""The paper's Figure 1 shape: retrieval quality against query-side speed (queries/s, log scale).

Used by ``care demo`` (its ``quality_vs_qps.png``) and ``benchmarks/bench_speed.py``. Needs the
``plots`` extra (matplotlib).

A model is placed on the speed axis only when its latency means something (:func:`speed_of`): the
measurement's self-check passed and the model is not overhead-dominated (a tiny tower's time is the
framework's, not the architecture's). Other models are drawn in a separate strip left of the axis,
at their quality, marked "speed not comparable". ``care run``'s report passes its own points: every dense row
timed in the latency step's one engine is placed once the self-check passed (a row at the engine's measured floor
too: its speed is what that engine gives, :mod:`care.pipeline.latency`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from care.bench.latency import LatencyReport

#: Resolution of the saved figure.
FIGURE_DPI = 150
FIGURE_SIZE = (7, 4.5)
#: Widths of the strip holding models whose speed is not comparable and of the speed axis.
STRIP_WIDTH_RATIOS = (1, 4)


@dataclass(frozen=True)
class QualityPoint:
    """One model: its quality score and its query-side throughput (queries/s; None = not comparable)."""

    model: str
    score: float
    qps: float | None


def speed_of(report: LatencyReport | None, label: str) -> float | None:
    """Batch-1 queries/s of ``label`` when it can be compared, else None (no trusted measurement, not
    measured, or overhead-dominated)."""
    if report is None or not report.trusted or label not in report.models:
        return None
    timed = report.models[label]
    return None if timed.overhead_dominated else timed.qps


def quality_speed_figure(
    points: Sequence[QualityPoint],
    png: str | Path,
    *,
    speed_lines: Mapping[str, float] | None = None,
    ylabel: str = "quality",
    xlabel: str = "queries/s on CPU (log)",
    title: str = "quality vs query-side speed (cf. the paper's Figure 1)",
) -> Path:
    """Scatter ``points`` (annotated by model) over a log q/s axis and save a PNG.

    Args:
        points: models to place; ``qps=None`` puts a model in the "speed not comparable" strip.
        png: output path (parent folders are created).
        speed_lines: optional ``{name: q/s}`` drawn as vertical dashed lines (red when the name starts
            with ``doc-``: a document tower run online; green otherwise).
        ylabel, xlabel, title: axis labels and title.
    Returns:
        The PNG path.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import ScalarFormatter

    png = Path(png)
    png.parent.mkdir(parents=True, exist_ok=True)
    lines = dict(speed_lines or {})
    placed = [p for p in points if p.qps is not None and p.qps > 0]
    unplaced = [p for p in points if p not in placed]
    if unplaced:  # a strip left of the speed axis: quality shown, speed deliberately not
        fig, (strip, ax) = plt.subplots(1, 2, sharey=True, figsize=FIGURE_SIZE,
                                        gridspec_kw={"width_ratios": STRIP_WIDTH_RATIOS})
        for p in unplaced:
            strip.scatter(0, p.score, marker="x", color="0.4", zorder=3)
            strip.annotate(p.model, (0, p.score), fontsize=7, xytext=(5, -3), textcoords="offset points", color="0.3")
        strip.set_xlim(-0.2, 1.0)
        strip.set_xticks([])
        strip.set_xlabel("speed not comparable\n(overhead-dominated\nor unchecked)", fontsize=7)
        strip.set_ylabel(ylabel)
    else:
        fig, ax = plt.subplots(figsize=FIGURE_SIZE)
        ax.set_ylabel(ylabel)
    for p in placed:
        ax.scatter(p.qps, p.score, zorder=3)
        ax.annotate(p.model, (p.qps, p.score), fontsize=8, xytext=(4, 4), textcoords="offset points")
    for name, qps in lines.items():
        ax.axvline(qps, color="tab:red" if name.startswith("doc-") else "tab:green", linestyle="--", linewidth=0.8)
        ax.annotate(name, (qps, 0.98), xycoords=("data", "axes fraction"), rotation=90, fontsize=7, va="top", ha="right")
    xs = [p.qps for p in placed] + list(lines.values())
    if xs:
        ax.set_xlim(min(xs) / 2, max(xs) * 2)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.set_xlabel(xlabel, fontsize=8)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(png, dpi=FIGURE_DPI)
    plt.close(fig)
    return png
