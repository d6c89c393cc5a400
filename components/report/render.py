"""The page model as one self-contained HTML file: inline CSS and SVG, images as data URIs, no script.

A Content-Security-Policy meta tag forbids every request (`default-src 'none'`) except data-URI images and the
inline styles, so the file shows the same from disk, a mail attachment or a KFP artifact, and cannot reach out.
Every text is escaped with `html.escape`, its bidi controls written as escapes (`text.visible`); only the plots'
SVG, which matplotlib wrote (with the same rule for its text, `plots`), goes in as markup. Names from the data in
tables are shortened, whole in a `title` tooltip (`page.Name`).
"""

from __future__ import annotations

import html

from components.report.page import (
    Alert,
    Block,
    Collapsed,
    Facts,
    Figure,
    ImageGrid,
    Lead,
    Missing,
    Name,
    Page,
    Paragraph,
    Section,
    Table,
)
from components.report.text import short_name, visible

CONTENT_SECURITY_POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

STYLE = """
:root { --ink: #1f2933; --muted: #52606d; --line: #d9e2ec; --good: #1b7f3b; --bad: #b42318;
        --neutral: #52606d; --paper: #ffffff; --band: #f5f7fa; --note: #fff8e6; }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
       color: var(--ink); background: var(--band); }
header { background: var(--paper); border-bottom: 1px solid var(--line); padding: 1.25rem 1rem 0.75rem; }
.wrap { max-width: 1100px; margin: 0 auto; }
h1 { margin: 0; font-size: 1.6rem; }
.subtitle { color: var(--muted); margin: 0.2rem 0 0.6rem; overflow-wrap: anywhere; }
.verdict { display: inline-block; padding: 0.2rem 0.8rem; border-radius: 999px; color: #fff; font-weight: 700; }
.verdict.good { background: var(--good); } .verdict.bad { background: var(--bad); }
.verdict.neutral { background: var(--neutral); }
nav ul { list-style: none; display: flex; flex-wrap: wrap; gap: 0.4rem 1rem; padding: 0; margin: 0.8rem 0 0; }
nav a { color: var(--ink); }
main { padding: 1rem; }
section { background: var(--paper); border: 1px solid var(--line); border-radius: 8px; padding: 1rem 1.25rem;
          margin: 0 auto 1rem; max-width: 1100px; }
h2 { margin: 0 0 0.6rem; font-size: 1.3rem; }
.lead { font-size: 1.2rem; font-weight: 600; margin: 0.2rem 0 0.6rem; }
.lead.good { color: var(--good); } .lead.bad { color: var(--bad); }
.missing { background: var(--note); border-left: 4px solid #e6a700; padding: 0.5rem 0.75rem; margin: 0.6rem 0; }
.alert { background: #fdecea; border-left: 4px solid var(--bad); padding: 0.5rem 0.75rem; margin: 0.6rem 0; }
.alert strong { color: var(--bad); }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 0.25rem 1rem; margin: 0.6rem 0; }
dt { color: var(--muted); } dd { margin: 0; overflow-wrap: anywhere; }
figure { margin: 0.8rem 0; }
figure svg { display: block; max-width: 100%; height: auto; }
figcaption, caption { color: var(--muted); font-size: 0.9rem; text-align: left; padding: 0.3rem 0; }
.table { overflow-x: auto; margin: 0.6rem 0; }
table { border-collapse: collapse; min-width: 50%; font-size: 0.95rem; }
th, td { border-bottom: 1px solid var(--line); padding: 0.3rem 0.6rem; text-align: left; vertical-align: top;
         overflow-wrap: anywhere; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(104px, 1fr)); gap: 0.75rem;
        list-style: none; padding: 0; margin: 0.6rem 0; }
.grid img { width: 96px; height: 96px; object-fit: contain; image-rendering: pixelated;
            border: 1px solid var(--line); background: #000; }
.grid li { font-size: 0.85rem; text-align: center; overflow-wrap: anywhere; }
details { margin: 0.6rem 0; } summary { cursor: pointer; font-weight: 600; }
pre { background: var(--band); padding: 0.75rem; overflow-x: auto; font-size: 0.85rem; }
@media (max-width: 600px) {
  body { font-size: 15px; } main { padding: 0.5rem; } section { padding: 0.75rem; }
  figure.plot { overflow-x: auto; } figure.plot svg { max-width: none; width: 560px; }
  dl { grid-template-columns: 1fr; } dt { font-weight: 600; }
}
"""


def _escape(value: str) -> str:
    """Text as HTML: markup characters escaped, bidi controls shown as escapes."""
    return html.escape(visible(value))


def _cell(cell: str | Name) -> str:
    if not isinstance(cell, Name):
        return _escape(cell)
    shown = short_name(cell.text)
    if shown == visible(cell.text):
        return _escape(cell.text)
    return f'<span class="name" title="{_escape(cell.text)}">{html.escape(shown)}</span>'


def _block(block: Block) -> str:
    escape = _escape
    if isinstance(block, Lead):
        return f'<p class="lead {escape(block.tone)}">{escape(block.text)}</p>'
    if isinstance(block, Paragraph):
        return f"<p>{escape(block.text)}</p>"
    if isinstance(block, Missing):
        return f'<p class="missing" role="note">{escape(block.text)}</p>'
    if isinstance(block, Alert):
        return f'<p class="alert" role="note"><strong>{escape(block.title)}</strong> {escape(block.text)}</p>'
    if isinstance(block, Facts):
        items = "".join(f"<dt>{escape(label)}</dt><dd>{escape(value)}</dd>" for label, value in block.items)
        return f"<dl>{items}</dl>"
    if isinstance(block, Table):
        head = "".join(
            f'<th scope="col" class="num">{escape(header)}</th>'
            if column in block.numeric
            else f'<th scope="col">{escape(header)}</th>'
            for column, header in enumerate(block.headers)
        )
        body = "".join(
            "<tr>"
            + "".join(
                f'<td class="num">{_cell(cell)}</td>' if column in block.numeric else f"<td>{_cell(cell)}</td>"
                for column, cell in enumerate(row)
            )
            + "</tr>"
            for row in block.rows
        )
        return (
            f'<div class="table"><table><caption>{escape(block.caption)}</caption>'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
        )
    if isinstance(block, Figure):  # the SVG is matplotlib's markup with escaped <title> and <desc>
        return f'<figure class="plot">{block.svg}<figcaption>{escape(block.caption)}</figcaption></figure>'
    if isinstance(block, ImageGrid):
        items = "".join(
            f'<li><img src="data:image/png;base64,{escape(image.png)}" alt="{escape(image.alt)}" width="96" '
            f'height="96"><br>{escape(image.label)}</li>'
            for image in block.images
        )
        return f'<figure><ul class="grid">{items}</ul><figcaption>{escape(block.caption)}</figcaption></figure>'
    if isinstance(block, Collapsed):
        return f"<details><summary>{escape(block.summary)}</summary><pre>{escape(block.text)}</pre></details>"
    raise TypeError(f"no markup for a {type(block).__name__} block")


def _section(section: Section) -> str:
    blocks = "\n".join(_block(block) for block in section.blocks)
    heading = f"{section.id}-heading"
    return (
        f'<section id="{_escape(section.id)}" aria-labelledby="{heading}">'
        f'<h2 id="{heading}">{_escape(section.title)}</h2>\n{blocks}</section>'
    )


def render_page(page: Page) -> str:
    """The page as a complete HTML document."""
    escape = _escape
    links = "".join(f'<li><a href="#{escape(s.id)}">{escape(s.title)}</a></li>' for s in page.sections)
    sections = "\n".join(_section(section) for section in page.sections)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(page.title)} run report: {escape(page.verdict)}</title>
<style>{STYLE}</style>
</head>
<body>
<header><div class="wrap">
<h1>{escape(page.title)} <span class="verdict {escape(page.tone)}">{escape(page.verdict)}</span></h1>
<p class="subtitle">{escape(page.subtitle)}</p>
<nav aria-label="Sections"><ul>{links}</ul></nav>
</div></header>
<main>
{sections}
</main>
</body>
</html>
"""
