"""Pages that print: a teacher prints the index or a class page (or saves it as PDF) for a handout. Printed to PDF on
A4 in headless Chromium (DevTools Page.printToPDF, which runs the page's print handlers as the print dialog does), every
figure is drawn, fits the page's width and no code or output line runs past it. Round 3 of issue 41: the index printed
26 of 29 figures blank (they draw on scroll), class.html cropped figures and cut code lines."""

from __future__ import annotations

import json
import os

import nbformat
import plotly.graph_objects as go
import pytest
from devtools import CHROMIUM, chromium
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from workbench.runs.execute import Outcome
from workbench.runs.export import export_notebook
from workbench.runs.options import cell_slug
from workbench.runs.plan import Execution
from workbench.runs.report import write_report
from workbench.viz import figures
from workbench.viz.figures import PageLoadsPlotlyRenderer
from workbench.viz.widgets import LinkedCurve, LossCurvePanel

needs_chromium = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"),
    reason="needs Chromium (Debian: apt-get install chromium); runs in CI",
)

# Registered after the page's own handlers: in the print layout (the print media's change, after "beforeprint"),
# what the printed page shows: its width, each figure (drawn? its right edge) and each code or output line's block.
PRINT_PROBE = """
matchMedia("print").addEventListener("change", (event) => {
  if (!event.matches) return;
  const right = (element) => element.getBoundingClientRect().right;
  window.printed = {
    page: document.documentElement.clientWidth,
    figures: [...document.querySelectorAll(FIGURES)].map((plot) => {
      const svg = plot.querySelector(".main-svg");
      return {drawn: !!svg, right: svg ? right(svg) : null};
    }),
    lines: [...document.querySelectorAll("pre")].filter((pre) => pre.offsetParent).map((pre) => {
      const text = document.createRange();
      text.selectNodeContents(pre);
      let shown = document.documentElement.clientWidth;  // the page, or a box that clips its overflow
      for (let box = pre; box; box = box.parentElement) {
        if (getComputedStyle(box).overflowX !== "visible") shown = Math.min(shown, right(box));
      }
      return {text: pre.textContent.slice(0, 60), right: Math.max(...[...text.getClientRects()].map((r) => r.right)),
              shown};
    }),
  };
});
"""


# after printing: each figure still drawn, its layout's width (None: responsive, the screen's width)
AFTER = "[...document.querySelectorAll('.js-plotly-plot')].filter((p) => p.layout).map((p) => p.layout.width ?? null)"


def _printed(page, figures_selector: str, width: int = 1280) -> dict:
    """What ``page`` shows while it prints to a PDF on A4 in Chromium ``width`` px wide, and the PDF's size."""
    with chromium(width) as tab:
        tab.call("Page.enable")
        tab.call("Page.navigate", url=page.as_uri())
        tab.evaluate(
            "new Promise((done) => document.readyState === 'complete' ? done() : addEventListener('load', done))"
        )
        tab.evaluate(PRINT_PROBE.replace("FIGURES", json.dumps(figures_selector)))
        pdf = tab.print_pdf()
        printed = tab.evaluate("window.printed")
        after = tab.evaluate(AFTER)
        folded = tab.evaluate("document.querySelectorAll('details:not([open])').length")
    assert pdf.startswith(b"%PDF") and printed, "the page did not print"
    return {**printed, "after": after, "folded": folded}


def _assert_whole_on_the_page(printed: dict, figures: int) -> None:
    assert len(printed["figures"]) == figures
    problems = {
        "not drawn": [index for index, figure in enumerate(printed["figures"]) if not figure["drawn"]],
        "cropped": [figure for figure in printed["figures"] if figure["drawn"] and figure["right"] > printed["page"]],
        "lines cut": [line for line in printed["lines"] if line["right"] > line["shown"] + 1],
    }
    assert problems == {"not drawn": [], "cropped": [], "lines cut": []}, printed["page"]


def _outcome(run_dir, notebook, point: dict, figures_saved: int) -> Outcome:
    slug = cell_slug(point) if point else ""
    folder = run_dir / notebook.stem / slug
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(figures_saved):
        figure = go.Figure(go.Scatter(x=list(range(40)), y=[i * index for i in range(40)]), layout={"height": 300})
        figures.save(figure, f"line_{index}", folder / "figures", caption=f"A line, figure {index}.")
    return Outcome(Execution(notebook, dict(point), dict(point), slug), folder, "ok", 1.0, metrics={"metrics": {}})


@needs_chromium
def test_printing_the_index_draws_every_figure_within_the_page(tmp_path):
    notebook = tmp_path / "05_walkthrough.ipynb"
    notebook.write_text("{}", encoding="utf-8")
    outcomes = [_outcome(tmp_path, notebook, {"epsilon": index / 10}, 3) for index in range(1, 8)]  # folded: > 5
    page = write_report(tmp_path, outcomes, ["epsilon"])
    printed = _printed(page, "div.plot[data-figure]")
    _assert_whole_on_the_page(printed, figures=7 * 3)
    assert all(width is None for width in printed["after"])  # those still drawn: the screen's width again
    assert printed["folded"] == 7 + 1  # the figures' parts (and summary.csv's table) folded again


def _class_notebook(path) -> None:
    """A class page's parts: long code lines, a long output line, a wide figure and a slider panel."""
    wide = go.Figure(go.Bar(x=list("abcdefghij"), y=list(range(10))), layout={"width": 1200, "height": 400})
    curves = [LinkedCurve("ce", label="CE"), LinkedCurve("focal", linked=("gamma",), label="FL")]
    panel = LossCurvePanel(curves, slider_names=("gamma",), interactive=False).page_figure()
    long_code = "panel = LossCurvePanel([LinkedCurve('ce', label='CE'), LinkedCurve('focal', linked=('gamma',))], " * 2
    cells = [
        new_markdown_cell("# A class handout"),
        new_code_cell(long_code, outputs=[new_output("stream", name="stdout", text="x" * 300 + "\n")]),
        new_code_cell(
            "show(wide)",
            outputs=[new_output("display_data", data=PageLoadsPlotlyRenderer().to_mimebundle(wide.to_dict()))],
        ),
        new_code_cell(
            "panel.display()",
            outputs=[new_output("display_data", data=PageLoadsPlotlyRenderer().to_mimebundle(panel.to_dict()))],
        ),
    ]
    nbformat.write(new_notebook(cells=cells), path)


@needs_chromium
@pytest.mark.parametrize("width", [1280, 800])
def test_printing_a_class_page_keeps_figures_and_code_lines_whole_on_a4(tmp_path, width):
    _class_notebook(tmp_path / "class.ipynb")
    page = export_notebook(tmp_path / "class.ipynb", student=False)
    printed = _printed(page, ".js-plotly-plot", width)
    _assert_whole_on_the_page(printed, figures=2)
    assert printed["after"] == [1200, None]  # back to the figure's own width, and the panel's responsive one
