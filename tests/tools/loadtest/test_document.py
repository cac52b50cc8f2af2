"""The reports' one renderer: a document written once as Markdown, the HTML converted from it."""

from __future__ import annotations

from pathlib import Path

from tools.loadtest.document import Document, Plot, Section, Table, html, markdown, write

SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>'
DOCUMENT = Document(
    "Load <run>",
    [
        Section("Reading", "", ["- first point\n- second point"]),
        Section(
            "Targets",
            "Judged by `metrics`.",
            [Table(["target", "met"], [["p90 <= 25%", "**no**"], ["zero lost", "yes"]]), Plot("plot.svg", SVG)],
        ),
    ],
)


def test_markdown_is_headings_text_and_blocks_each_followed_by_a_blank_line() -> None:
    assert markdown(DOCUMENT) == (
        "# Load <run>\n\n"
        "## Reading\n\n- first point\n- second point\n\n"
        "## Targets\n\nJudged by `metrics`.\n\n"
        "| target | met |\n|---|---|\n| p90 <= 25% | **no** |\n| zero lost | yes |\n\n"
        "![plot.svg](plot.svg)\n"
    )


def test_html_is_the_markdown_converted_with_each_plot_inlined() -> None:
    page = html(DOCUMENT)

    assert page.startswith("<!doctype html>")
    assert "<title>Load &lt;run&gt;</title>" in page
    assert "<h2>Reading</h2>" in page
    assert "<ul>\n<li>first point</li>\n<li>second point</li>\n</ul>" in page
    assert "<p>Judged by <code>metrics</code>.</p>" in page
    assert "<th>target</th>" in page
    assert "<td>p90 &lt;= 25%</td>" in page
    assert "<td><strong>no</strong></td>" in page
    assert SVG in page
    assert "<img" not in page


def test_an_image_that_is_not_a_plot_stays_a_link() -> None:
    page = html(Document("t", intro=["![elsewhere](elsewhere.png)"]))

    assert '<img src="elsewhere.png" alt="elsewhere" />' in page


def test_write_puts_both_reports_and_the_plots_side_by_side(tmp_path: Path) -> None:
    write(DOCUMENT, tmp_path / "out", "report")

    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == ["plot.svg", "report.html", "report.md"]
    assert (tmp_path / "out" / "report.md").read_text() == markdown(DOCUMENT)
    assert (tmp_path / "out" / "report.html").read_text() == html(DOCUMENT)
    assert (tmp_path / "out" / "plot.svg").read_text() == SVG
