"""The reports' one renderer: a report is data (a `Document` of sections of text, tables and plots),
written once as Markdown; the HTML page is that same Markdown converted (markdown-it, CommonMark with
tables), with each plot's SVG inlined where the Markdown links it, so the page needs no other file.

Blocks, in the order they appear in a section:
- `str`: Markdown as it is (a paragraph, or a list when its lines start with "- ");
- `Table`: a header and rows of cells (Markdown inside a cell is kept: `**no**` is bold);
- `Plot`: an SVG, written beside the report as `name` and linked (Markdown) or inlined (HTML).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

STYLE = (
    "body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em}"
    "table{border-collapse:collapse;margin:1em 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 6px}"
    "th{background:#f4f4f4}"
)


@dataclass(frozen=True)
class Table:
    header: Sequence[str]
    rows: Sequence[Sequence[str]]


@dataclass(frozen=True)
class Plot:
    name: str
    svg: str


Block = str | Table | Plot


@dataclass(frozen=True)
class Section:
    """A heading, the text under it (Markdown; may be empty) and its blocks."""

    title: str
    text: str
    blocks: Sequence[Block]


@dataclass(frozen=True)
class Document:
    title: str
    sections: Sequence[Section] = ()
    intro: Sequence[Block] = ()

    def plots(self) -> list[Plot]:
        blocks = [*self.intro, *(block for section in self.sections for block in section.blocks)]
        return [block for block in blocks if isinstance(block, Plot)]


def markdown_table(table: Table) -> str:
    lines = ["| " + " | ".join(table.header) + " |", "|" + "---|" * len(table.header)]
    lines += ["| " + " | ".join(row) + " |" for row in table.rows]
    return "\n".join(lines)


def markdown(document: Document) -> str:
    """The document as Markdown: the title, then each section's heading, text and blocks, a blank
    line after each."""
    parts = [f"# {document.title}", ""]
    parts += _blocks(document.intro)
    for section in document.sections:
        parts += [f"## {section.title}", ""]
        if section.text:
            parts += [section.text, ""]
        parts += _blocks(section.blocks)
    return "\n".join(parts)


class _PlotsInline(RendererHTML):
    """Renders a Markdown image that links a plot (`env["plots"]`: name -> SVG) as the SVG itself."""

    def image(self, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        svg = env.get("plots", {}).get(tokens[idx].attrGet("src"))
        return svg if isinstance(svg, str) else super().image(tokens, idx, options, env)


CONVERTER = MarkdownIt("commonmark", renderer_cls=_PlotsInline).enable("table")


def html(document: Document) -> str:
    """The document's Markdown as one HTML page, with every plot inlined."""
    body = CONVERTER.render(markdown(document), {"plots": {plot.name: plot.svg for plot in document.plots()}})
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(document.title)}</title>"
        f"<style>{STYLE}</style></head><body>\n{body}</body></html>\n"
    )


def write(document: Document, out: Path, stem: str) -> None:
    """Write `stem.md`, `stem.html` and the plots into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    for plot in document.plots():
        (out / plot.name).write_text(plot.svg)
    (out / f"{stem}.md").write_text(markdown(document))
    (out / f"{stem}.html").write_text(html(document))


def _blocks(blocks: Sequence[Block]) -> list[str]:
    parts = []
    for block in blocks:
        if isinstance(block, Table):
            parts.append(markdown_table(block))
        elif isinstance(block, Plot):
            parts.append(f"![{block.name}]({block.name})")
        else:
            parts.append(block)
        parts.append("")
    return parts
