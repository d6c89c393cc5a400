"""The report's page model: sections of plain blocks, built from the run's facts and rendered to HTML.

A section is a list of blocks; each block says what it shows, not how: `render.render_page` decides the markup.
Everything is plain data, so the sections can be tested without a browser and rendered without matplotlib
(`Figure` already holds its SVG).

Example:
    Page("tfxp-digits", "run of 2026-11-30 14:02", "pushed", "pushed",
         [Section("decision", "Decision", [Lead("pushed version 1796091911")])])
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Lead:
    """The section's one-line answer, shown large; `tone` colours it: `good`, `bad`, `neutral`."""

    text: str
    tone: str = "neutral"


@dataclass(frozen=True)
class Paragraph:
    """Plain text."""

    text: str


@dataclass(frozen=True)
class Missing:
    """What the section cannot show, and why (no edge model, a failed Trainer, no baseline yet, an unreadable
    output)."""

    text: str


@dataclass(frozen=True)
class Alert:
    """What a reader must not miss in its section (the Trainer's diagnosis that the model it trained is broken):
    shown boxed in the `bad` colour; `title` leads it in bold."""

    title: str
    text: str


@dataclass(frozen=True)
class Facts:
    """Label → value pairs, as a definition list."""

    items: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Name:
    """A table cell holding a name from the data (a class name): shown shortened (`text.short_name`), whole in its
    tooltip, so a 300-character name does not stretch the table."""

    text: str


@dataclass(frozen=True)
class Table:
    """A table with a caption; `numeric` marks the columns to right-align."""

    caption: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str | Name, ...], ...]
    numeric: tuple[int, ...] = ()


@dataclass(frozen=True)
class Figure:
    """A plot: `svg` is inline SVG markup that carries its own `<title>` and `<desc>`; `caption` says what it
    shows in words."""

    svg: str
    caption: str


@dataclass(frozen=True)
class Thumbnail:
    """One image of an image grid: `png` is base64 PNG data; `alt` describes it; `label` is shown under it."""

    png: str
    alt: str
    label: str


@dataclass(frozen=True)
class ImageGrid:
    """A grid of small images with labels."""

    caption: str
    images: tuple[Thumbnail, ...]


@dataclass(frozen=True)
class Collapsed:
    """Text that is folded away until opened (`<details>`), e.g. the config that ran."""

    summary: str
    text: str


Block = Lead | Paragraph | Missing | Alert | Facts | Table | Figure | ImageGrid | Collapsed


@dataclass(frozen=True)
class Section:
    """One section of the page: `id` is its anchor (`decision`, `data`, ...)."""

    id: str
    title: str
    blocks: list[Block] = field(default_factory=list)


@dataclass(frozen=True)
class Page:
    """The whole report.

    Attributes:
        title: The pipeline's name.
        subtitle: When the run started and where its output is.
        verdict: The decision in one or two words (`pushed`, `not pushed`, `failed in Trainer`).
        tone: `good`, `bad` or `neutral`, for the verdict's colour.
        sections: In page order.
    """

    title: str
    subtitle: str
    verdict: str
    tone: str
    sections: list[Section]


SECTION_IDS = ("decision", "data", "training", "evaluation", "edge", "components", "history")
"""Every report has these sections, in this order (a section with nothing to show says so)."""
