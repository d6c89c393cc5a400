"""The report's plots: matplotlib (Agg) figures written as inline SVG with a `<title>` and a `<desc>`.

Text stays text (`svg.fonttype: none`), so the plots are small, sharp at any zoom and readable by screen readers;
so it follows the page's rule for names from the data: bidi controls shown as escapes, class names on the axes cut
to `text.NAME_LIMIT` characters (`text.short_name`).
Each figure's element ids get the figure's key as a prefix, so several SVGs can share one HTML page. matplotlib
loads on the first plot, so `tfxp --help` does not pay for it.

Example:
    svg = line_plot("loss", "Training loss", "Loss per epoch", "epoch", "loss", {"train": [(0, 1.9), (1, 0.6)]})
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from components.report.text import short_name, visible

# Colour-blind-safe (Okabe–Ito), in the order series use them.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
STATE_COLOURS = {"complete": "#0072B2", "cached": "#9AA5B1", "failed": "#D55E00"}
STATE_NAMES = {"complete": "ran", "cached": "cached", "failed": "failed"}
OTHER_STATE = "#E69F00"
WIDTH_INCHES = 7.2
RC: dict[str, Any] = {
    "svg.fonttype": "none",
    "svg.hashsalt": "tfxp-report",
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Helvetica", "Arial"],
    "font.size": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 11,
    "axes.titleweight": "bold",
}


def _figure(key: str, height: float, draw: Callable[[Any], None], title: str, desc: str, columns: int = 1) -> str:
    """Draws on a new figure (one row of `columns` axes) and returns its SVG."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    with matplotlib.rc_context(cast(Any, RC)):  # matplotlib types rc keys as literals
        figure, axes = plt.subplots(1, columns, figsize=(WIDTH_INCHES, height), layout="constrained")
        try:
            draw(axes)
            buffer = io.StringIO()
            figure.savefig(buffer, format="svg", metadata={"Date": None, "Creator": None})
        finally:
            plt.close(figure)
    return accessible_svg(buffer.getvalue(), key, title, desc)


def accessible_svg(text: str, key: str, title: str, desc: str) -> str:
    """matplotlib's SVG file as an inline SVG element: ids prefixed with `key`, with `role="img"`, a `<title>`
    and a `<desc>`.

    Example:
        accessible_svg('<?xml ...?><svg width="10pt"><g id="a"/></svg>', "loss", "Loss", "...")
        # '<svg role="img" aria-labelledby="loss-title loss-desc" width="10pt"><title id="loss-title">...'
    """
    svg = text[text.index("<svg") :]
    svg = re.sub(r'\bid="([^"]+)"', lambda match: f'id="{key}-{match[1]}"', svg)
    svg = re.sub(r"url\(#([^)]+)\)", lambda match: f"url(#{key}-{match[1]})", svg)
    svg = re.sub(r'href="#([^"]+)"', lambda match: f'href="#{key}-{match[1]}"', svg)
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.DOTALL)
    head_end = svg.index(">")
    labels = (
        f'<title id="{key}-title">{html.escape(visible(title))}</title>'
        f'<desc id="{key}-desc">{html.escape(visible(desc))}</desc>'
    )
    attributes = f' role="img" aria-labelledby="{key}-title {key}-desc" class="plot" data-plot="{key}"'
    return visible(svg[:4] + attributes + svg[4 : head_end + 1] + labels + svg[head_end + 1 :])


def _long(names: Sequence[str]) -> bool:
    """Whether horizontal tick labels would run into each other."""
    return any(len(name) > 8 for name in names)


def grouped_bars(
    key: str, title: str, desc: str, categories: Sequence[str], series: Mapping[str, Sequence[float]], ylabel: str
) -> str:
    """Bars per category, one colour per series (e.g. examples per class, train and eval side by side)."""

    def draw(axes: Any) -> None:
        width = 0.8 / max(len(series), 1)
        positions = range(len(categories))
        for number, (name, values) in enumerate(series.items()):
            offsets = [position + (number - (len(series) - 1) / 2) * width for position in positions]
            axes.bar(offsets, values, width, label=name, color=PALETTE[number % len(PALETTE)])
        names = [short_name(name) for name in categories]
        axes.set_xticks(list(positions), names, rotation=90 if len(categories) > 12 or _long(names) else 0)
        axes.set_xlabel("class")
        axes.set_ylabel(ylabel)
        axes.set_title(title)
        _legend_outside(axes)

    return _figure(key, 3.2, draw, title, desc)


def curves(
    key: str, title: str, desc: str, panels: Mapping[str, Mapping[str, Sequence[Sequence[float]]]], xlabel: str
) -> str:
    """Line plots side by side, one panel per metric (`panels`: metric → series name → [[x, y], ...]); a series
    with one point is drawn as a marker."""

    def draw(axes: Any) -> None:
        for axis, (metric, series) in zip(_as_list(axes), panels.items(), strict=True):
            for number, (name, points) in enumerate(series.items()):
                xs, ys = [point[0] for point in points], [point[1] for point in points]
                style = {"marker": "o", "linestyle": "-" if len(points) > 1 else "none", "markersize": 5}
                axis.plot(xs, ys, label=name, color=PALETTE[number % len(PALETTE)], **style)
            axis.set_title(metric)
            axis.set_xlabel(xlabel)
            axis.set_ylabel(metric)
            axis.xaxis.get_major_locator().set_params(integer=True)
            axis.legend(frameon=False)
            axis.grid(alpha=0.3)

    return _figure(key, 3.0, draw, title, desc, columns=len(panels))


def line_plot(
    key: str,
    title: str,
    desc: str,
    xlabel: str,
    ylabel: str,
    series: Mapping[str, Sequence[Sequence[float]]],
    marks: Mapping[str, float] | None = None,
) -> str:
    """Lines without markers, for many points (`series`: name → [[x, y], ...], e.g. a learning-rate schedule);
    each of `marks` (label → x) is a dotted vertical line, named in the legend (e.g. where the warmup ends)."""

    def draw(axes: Any) -> None:
        for number, (name, points) in enumerate(series.items()):
            xs, ys = [point[0] for point in points], [point[1] for point in points]
            axes.plot(xs, ys, label=name, color=PALETTE[number % len(PALETTE)], linewidth=2)
        for label, x in (marks or {}).items():
            axes.axvline(x, color="#555555", linestyle=":", linewidth=1.5, label=label)
        axes.set_xlabel(xlabel)
        axes.set_ylabel(ylabel)
        axes.set_title(title)
        if all(point[1] >= 0 for points in series.values() for point in points):
            axes.set_ylim(bottom=0)  # a rate that decays to 0 ends on the axis, not above an offset one
        axes.grid(alpha=0.3)
        _legend_outside(axes, fontsize=8)

    return _figure(key, 3.0, draw, title, desc)


def _legend_outside(axes: Any, **options: Any) -> None:
    """The legend right of the plot, where it covers no data."""
    axes.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.01, 1.0), **options)


def _as_list(axes: Any) -> list[Any]:
    return list(axes.flat) if hasattr(axes, "flat") else [axes]


def heat_map(key: str, title: str, desc: str, labels: Sequence[str], matrix: Sequence[Sequence[int]]) -> str:
    """A confusion matrix: rows the true class, columns the predicted one; counts written in the cells when
    there are few classes."""
    size = len(labels)

    def draw(axes: Any) -> None:
        image = axes.imshow(matrix, cmap="Blues", interpolation="nearest")
        axes.set_xlabel("predicted class")
        axes.set_ylabel("true class")
        axes.set_title(title)
        if size <= 30:
            names = [short_name(name) for name in labels]
            axes.set_xticks(range(size), names, rotation=90 if size > 12 or _long(names) else 0)
            axes.set_yticks(range(size), names)
        if size <= 15:
            peak = max((max(row) for row in matrix), default=0)
            for row, values in enumerate(matrix):
                for column, value in enumerate(values):
                    if value:
                        colour = "white" if value > peak / 2 else "black"
                        axes.text(column, row, str(value), ha="center", va="center", color=colour, fontsize=8)
        axes.figure.colorbar(image, ax=axes, label="eval examples", shrink=0.8)

    return _figure(key, 4.6, draw, title, desc)


def timeline(key: str, title: str, desc: str, rows: Sequence[tuple[str, float, float, str]]) -> str:
    """Horizontal bars: (component, start in s from the run's start, seconds, state), first on top."""

    span = max((start + seconds for _, start, seconds, _ in rows), default=1.0)

    def draw(axes: Any) -> None:
        for position, (_, start, seconds, state) in enumerate(rows):
            colour = STATE_COLOURS.get(state, OTHER_STATE)
            # A cached component takes no time: a sliver still shows where it was.
            axes.barh(position, max(seconds, span / 150), left=start, color=colour, height=0.6)
        axes.set_yticks(range(len(rows)), [short_name(row[0]) for row in rows])
        axes.invert_yaxis()
        axes.set_xlabel("seconds since the run started")
        axes.set_title(title)
        axes.grid(axis="x", alpha=0.3)
        from matplotlib.patches import Patch

        shown = sorted({row[3] for row in rows})
        handles = [
            Patch(color=STATE_COLOURS.get(state, OTHER_STATE), label=STATE_NAMES.get(state, state)) for state in shown
        ]
        _legend_outside(axes, handles=handles, title="state")

    return _figure(key, 0.9 + 0.32 * len(rows), draw, title, desc)


def history_plot(
    key: str,
    title: str,
    desc: str,
    runs: Sequence[tuple[Any, float | None, str]],
    served: Sequence[tuple[Any, float]],
    minimum: float | None,
) -> str:
    """Accuracy of each run over time, marked by decision (`pushed`, `not pushed`, `failed`), the served
    version's accuracy as a step line, and the `min_accuracy` threshold."""
    markers = {"pushed": ("^", PALETTE[2]), "not pushed": ("X", PALETTE[3]), "failed": ("s", "#9AA5B1")}

    def draw(axes: Any) -> None:
        for decision, (marker, colour) in markers.items():
            points = [(when, accuracy) for when, accuracy, kind in runs if kind == decision and accuracy is not None]
            if points:
                xs, ys = zip(*points, strict=True)
                axes.scatter(xs, ys, marker=marker, color=colour, s=55, label=f"run: {decision}", zorder=3)
        if served:
            xs, ys = zip(*served, strict=True)
            axes.step(xs, ys, where="post", color=PALETTE[0], label="served version", linewidth=2)
        if minimum is not None:
            axes.axhline(minimum, color="#555555", linestyle="--", linewidth=1, label="min_accuracy")
        from matplotlib.dates import AutoDateLocator, ConciseDateFormatter

        locator = AutoDateLocator()
        axes.xaxis.set_major_locator(locator)
        axes.xaxis.set_major_formatter(ConciseDateFormatter(locator))
        axes.set_xlabel("run start (local time)")
        axes.set_ylabel("eval accuracy")
        axes.set_title(title)
        axes.grid(alpha=0.3)
        _legend_outside(axes, fontsize=8)

    return _figure(key, 3.4, draw, title, desc)


def accuracy_bars(key: str, title: str, desc: str, bars: Sequence[tuple[str, float]], minimum: float) -> str:
    """Horizontal accuracy bars (e.g. the candidate and the baseline) against the `min_accuracy` line."""

    def draw(axes: Any) -> None:
        names = [name for name, _ in bars]
        values = [value for _, value in bars]
        colours = [PALETTE[number % len(PALETTE)] for number in range(len(bars))]
        axes.barh(range(len(bars)), values, color=colours, alpha=0.85, height=0.6)
        for position, value in enumerate(values):
            axes.text(value, position, f" {value:.4f}", va="center", fontsize=9)
        axes.axvline(minimum, color="#1f2933", linestyle="--", linewidth=1.5, label=f"min_accuracy {minimum}", zorder=3)
        axes.set_yticks(range(len(bars)), names)
        axes.invert_yaxis()
        low = min([*values, minimum])
        axes.set_xlim(max(0.0, low - 0.1), 1.0)
        axes.set_xlabel("eval accuracy (fraction correct)")
        axes.set_title(title)
        _legend_outside(axes, fontsize=8)

    return _figure(key, 0.9 + 0.45 * len(bars), draw, title, desc)


def threshold_bars(key: str, title: str, desc: str, bars: Sequence[tuple[str, float, float]]) -> str:
    """Horizontal bars of measured distances as a fraction of their thresholds (`(name, distance, threshold)`), so
    measures of different scales share one axis; the threshold is the line at 1, bars past it are red."""

    def draw(axes: Any) -> None:
        ratios = [distance / threshold if threshold > 0 else 0.0 for _, distance, threshold in bars]
        colours = [STATE_COLOURS["failed"] if ratio > 1 else PALETTE[0] for ratio in ratios]
        axes.barh(range(len(bars)), ratios, color=colours, alpha=0.85, height=0.6)
        for position, (ratio, (_, distance, threshold)) in enumerate(zip(ratios, bars, strict=True)):
            axes.text(ratio, position, f" {distance:.3f} / {threshold:g}", va="center", fontsize=8)
        axes.axvline(1.0, color="#1f2933", linestyle="--", linewidth=1.5, label="threshold", zorder=3)
        axes.set_yticks(range(len(bars)), [short_name(name) for name, _, _ in bars])
        axes.invert_yaxis()
        axes.set_xlim(0.0, max([*ratios, 1.0]) * 1.25)
        axes.set_xlabel("distance / threshold (above 1: the check fires)")
        axes.set_title(title)
        _legend_outside(axes, fontsize=8)

    return _figure(key, 0.9 + 0.3 * len(bars), draw, title, desc)
