"""``python -m workbench export`` of notebooks the workbench did not run, built here with nbformat: a foreign
notebook's scripts, handlers, frames, ``javascript:`` links and remote resources are defused (each class checked in
headless Chromium: nothing runs, no request leaves) unless ``--trusted``, while the workbench's own figures draw;
pages without tqdm's frozen widget text, with readable injected parameters, no number broken across lines;
``--student`` with the usual solution tags; a missing attachment. Browser tests skip only where no Chromium is
installed and CI is unset (in CI they fail)."""

from __future__ import annotations

import ast
import html
import json
import re
from pathlib import Path

import nbformat
import numpy as np
import plotly.graph_objects as go
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output, new_raw_cell
from test_exports import _browse, _main, _rendered_dom, needs_chromium

from workbench.__main__ import main
from workbench.runs.export import export_notebook, readable_parameters
from workbench.runs.sanitize import PLOTLY_MIME, clean_html, figure_from_html
from workbench.viz.figures import PageLoadsPlotlyRenderer
from workbench.viz.widgets import PclWeightsPanel

REMOTE = "remote.invalid"  # every request goes to the test's recording proxy; none may be sent


def _mark(name: str) -> str:
    """JavaScript that, if it ever runs, leaves ``data-pwned-<name>`` on the page's root element."""
    return f"document.documentElement.setAttribute('data-pwned-{name}','1')"


# Each class of live content a notebook's outputs and markdown can carry, as a foreign notebook would.
HTML_PAYLOADS = {
    "script": f"<script>{_mark('script')}</script>",
    "onerror": f'<img src="missing.png" onerror="{_mark("onerror")}">',
    "svg-onload": f'<svg xmlns="http://www.w3.org/2000/svg" onload="{_mark("svg-onload")}"><rect/></svg>',
    "iframe": f'<iframe srcdoc="<script>parent.{_mark("iframe")}</script>"></iframe>',
    "object": f'<object data="data:text/html,<script>parent.{_mark("object")}</script>"></object>',
    "link": f'<a class="click-me" href="javascript:{_mark("link")}">click me</a>',
    "details": f'<details open ontoggle="{_mark("details")}"><summary>s</summary>t</details>',
    "remote-script": f'<script src="http://{REMOTE}/evil.js"></script>',
    "remote-image": f'<img src="https://{REMOTE}/pixel.png" alt="pixel">',
    "remote-css": f'<link rel="stylesheet" href="http://{REMOTE}/a.css">'
    f"<style>@import url(http://{REMOTE}/b.css);</style>",
    "remote-style": f'<div style="background-image: url(http://{REMOTE}/bg.png)">styled</div>',
}
MARKDOWN_PAYLOAD = (
    "# A foreign notebook\n\n"
    f"<script>{_mark('md-script')}</script>\n\n"
    f'<img src="missing.png" onerror="{_mark("md-onerror")}">\n\n'
    f"[click me](javascript:{_mark('md-link')})\n\n"
    f'<a class="click-me" href="javascript:{_mark("md-anchor")}">click me</a>\n\n'
    f"![remote](http://{REMOTE}/md.png)\n\nThe text stays: $x^2$."
)
SVG_OUTPUT = (
    f'<svg xmlns="http://www.w3.org/2000/svg" onload="{_mark("svg-output")}"><rect width="9" height="9"/></svg>'
)
# A foreign figure: a layout image from the network, a height that would break out of plotly.io's style attribute.
FOREIGN_FIGURE = {
    "data": [{"type": "bar", "y": [2, 1]}],
    "layout": {
        "height": f'300px" onmouseover="{_mark("height")}',
        "images": [{"source": f"http://{REMOTE}/logo.png", "xref": "paper", "yref": "paper", "x": 0, "y": 1}],
    },
}
# Markers each payload leaves when a trusted page runs it (the svg output is an image: it never runs).
LIVE_WHEN_TRUSTED = {"script", "onerror", "iframe", "link", "details", "javascript", "md-script", "md-onerror"}
CLICK_PROBE = """<script>
window.addEventListener("load", () => setTimeout(() => {
  for (const link of document.querySelectorAll("a")) {
    if (link.textContent.trim() === "click me") link.click();
  }
}, 500));
</script>"""


def _figure_bundle() -> dict:
    """A workbench figure's output as the headless renderer writes it: plotly's bundle and the page's div."""
    figure = go.Figure(go.Bar(x=["a", "b"], y=[1, 3]), layout={"title": "own figure"})
    bundle = {PLOTLY_MIME: json.loads(figure.to_json())}
    bundle.update(PageLoadsPlotlyRenderer().to_mimebundle(figure.to_dict()))
    return bundle


def _foreign_notebook(path: Path) -> Path:
    """A notebook with every payload class in its outputs and markdown, a figure and a live panel of the workbench."""
    outputs = [new_output("display_data", data={"text/html": payload}) for payload in HTML_PAYLOADS.values()]
    outputs += [
        new_output("display_data", data={"application/javascript": _mark("javascript"), "text/plain": "<JS>"}),
        new_output("display_data", data={"text/markdown": f"[click me](javascript:{_mark('output-md')})"}),
        new_output("display_data", data={"image/svg+xml": SVG_OUTPUT, "text/plain": "<svg>"}),
        new_output(
            "display_data",
            data={"text/vnd.mermaid": f'<img src="x" onerror="{_mark("mermaid")}">', "text/plain": "graph"},
        ),
        new_output("display_data", data=_figure_bundle()),
        new_output(  # the template would load an image from a file name the notebook gives
            "display_data",
            data={"image/png": "iVBORw0KGgo=", "text/plain": "png"},
            metadata={"filenames": {"image/png": f"http://{REMOTE}/output.png"}},
        ),
        new_output("display_data", data={PLOTLY_MIME: FOREIGN_FIGURE, "text/plain": "figure"}),
    ]
    panel = PclWeightsPanel(variants=("weighted",), interactive=False).page_figure()
    live = {"application/vnd.jupyter.widget-view+json": {"model_id": "0", "version_major": 2, "version_minor": 0}}
    live.update(PageLoadsPlotlyRenderer().to_mimebundle(panel.to_dict()))  # as a live panel's output carries it
    outputs.append(new_output("display_data", data=live))
    cells = [
        new_markdown_cell(MARKDOWN_PAYLOAD),
        new_code_cell("show()", outputs=outputs, execution_count=1),
        new_raw_cell(f"<script>{_mark('raw')}</script>", metadata={"raw_mimetype": "text/html"}),
    ]
    nbformat.write(new_notebook(cells=cells), path)
    return path


def _marks(dom: str) -> set[str]:
    return set(re.findall(r"data-pwned-([\w-]+)=", dom))


# ----------------------------------------------------------------------------- foreign notebooks


def test_sanitised_html_keeps_text_tables_and_embedded_images_only():
    cleaned = clean_html(
        '<table class="dataframe"><tr style="text-align: right; position: fixed"><td>1</td></tr></table>'
        '<h2 id="Results">Results<a class="anchor-link" href="#Results">¶</a></h2>'
        '<img src="data:image/png;base64,iVBORw0KGgo=" alt="a"><img src="data:text/html;base64,PHNjcmlwdD4=">'
        f'<a href="data:text/html,x">d</a><a href="https://example.org/">e</a><script>{_mark("x")}</script>'
    )
    assert '<table class="dataframe"><tbody><tr style="text-align:right"><td>1</td></tr></tbody></table>' in cleaned
    assert '<h2 id="Results">' in cleaned and 'href="#Results"' in cleaned
    assert 'src="data:image/png;base64,iVBORw0KGgo="' in cleaned and "data:text/html" not in cleaned
    assert 'href="https://example.org/"' in cleaned and "script" not in cleaned and "pwned" not in cleaned


def test_a_figures_html_is_read_back_into_its_data_and_nothing_else():
    figure = go.Figure(go.Scatter(y=[1, 2], name="</script><script>x()</script>"), layout={"height": 300})
    html_text = PageLoadsPlotlyRenderer().to_mimebundle(figure.to_dict())["text/html"]
    read = figure_from_html(html_text)
    assert read["data"] == json.loads(figure.to_json())["data"] and read["layout"]["height"] == 300
    assert figure_from_html("<script>Plotly.newPlot('x', evil())</script>") is None
    assert figure_from_html("<div>no figure</div>") is None


def test_a_foreign_page_holds_no_live_content(tmp_path):
    page = export_notebook(_foreign_notebook(tmp_path / "foreign.ipynb"))
    text = page.read_text(encoding="utf-8")
    shown = text[text.index("<main>") :]
    for needle in ("onerror", "onload", "ontoggle", "javascript:", "<iframe", "<object", "<link", REMOTE, "pwned"):
        assert needle not in shown.lower(), needle
    scripts = re.findall(r"<script\b[^>]*>(.*?)</script>", shown, flags=re.DOTALL)
    assert len(scripts) == 3 and all("Plotly.newPlot" in script for script in scripts)  # the figures, from data
    assert "A foreign notebook" in shown and "styled" in shown  # the text stays


@needs_chromium
def test_a_foreign_notebooks_page_runs_nothing_and_asks_no_server_in_chromium(tmp_path):
    page = export_notebook(_foreign_notebook(tmp_path / "foreign.ipynb"))
    dom = _rendered_dom(page, CLICK_PROBE)  # no request either
    assert not _marks(dom)
    assert len(re.findall(r'class="main-svg"', _main(dom))) >= 6  # the workbench's figure and live panel drew


@needs_chromium
def test_trusted_keeps_the_notebooks_own_scripts_in_chromium(tmp_path):
    notebook = _foreign_notebook(tmp_path / "foreign.ipynb")
    assert main(["export", str(notebook), "--trusted"]) == 0
    dom, requests = _browse(notebook.with_suffix(".html"), CLICK_PROBE)
    assert LIVE_WHEN_TRUSTED <= _marks(dom)  # the payloads are live: the page above defused each of them
    assert any(REMOTE in request for request in requests)
    assert len(re.findall(r'class="main-svg"', _main(dom))) >= 4


# ----------------------------------------------------------------------------- clean pages


def test_tqdm_widget_text_and_carriage_returns_leave_no_frozen_bars(tmp_path):
    bar = {"application/vnd.jupyter.widget-view+json": {"model_id": "1", "version_major": 2, "version_minor": 0}}
    outputs = [
        new_output("display_data", data={**bar, "text/plain": "train:   0%|          | 0/500 [00:00<?, ?it/s]"}),
        new_output("stream", name="stderr", text="eval:  10%|#         | 50/500\reval: 100%|##########| 500/500\n"),
        new_output("stream", name="stdout", text="done\n"),
    ]
    notebook = tmp_path / "bars.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell("train()", outputs=outputs)]), notebook)
    shown = export_notebook(notebook).read_text(encoding="utf-8")
    shown = shown[shown.index("<main>") :]
    assert "train:" not in shown and "eval:  10%" not in shown  # the widget's first state, the overwritten line
    assert "500/500" in shown and "done" in shown


def test_injected_parameters_read_as_written_and_keep_their_values(tmp_path):
    from papermill.translators import PythonTranslator

    values = {"text": "美丽 \"quoted\" 'single'", "data": {"path": "数据/训练.tsv", "note": "tab\there"}, "n": 3}
    cell = new_code_cell(PythonTranslator.codify(values, "Parameters"))  # papermill's own cell (papermill by hand)
    cell.metadata["tags"] = ["injected-parameters"]
    assert "\\u7f8e" in cell.source  # as papermill writes it
    readable = readable_parameters(cell.source)
    assert "美丽" in readable and "数据/训练.tsv" in readable and "\\u" not in readable

    def namespace(code: str) -> dict:
        scope: dict = {}
        exec(compile(ast.parse(code), "<parameters>", "exec"), scope)
        return {name: value for name, value in scope.items() if name != "__builtins__"}

    assert namespace(readable) == namespace(cell.source) == values
    notebook = tmp_path / "params.ipynb"
    nbformat.write(new_notebook(cells=[cell]), notebook)
    page = html.unescape(re.sub(r"<[^>]+>", "", export_notebook(notebook).read_text(encoding="utf-8")))
    assert "美丽" in page and "\\u7f8e" not in page


NUMBERS_LINE = (
    "This run (5 seed(s), test): always predicting 'irrelevant': accuracy 0.613, macro-F1 0.253. Macro-F1 CE "
    "0.412±0.031, LS 0.405±0.029, DSC 0.398±0.044, PCL reference 0.405±0.029, PCL expected_cost (global) "
    "0.421±0.035. Recall (%) of CE: irrelevant 12.5, related 97.1, highly_relevant -0.0. Identical predictions "
    "to LS: PCL reference 5/5. Far-error rate: CE 0.0123±0.0045, LS 0.0119±0.0051, 1234567.891, -3.5e-05."
)
# Each number of the printed line: its first and last character lie on one line of the page.
NUMBERS_PROBE = """<script>
window.addEventListener("load", () => {
  const pre = [...document.querySelectorAll(".jp-OutputArea-output pre")].find(p => p.textContent.includes("This run"));
  const node = pre.firstChild;
  const broken = [];
  let lines = new Set();
  for (const match of node.textContent.matchAll(/-?\\d[\\d.e+-]*(?:±\\d[\\d.e+-]*)?/g)) {
    const range = document.createRange();
    range.setStart(node, match.index);
    range.setEnd(node, match.index + match[0].length);
    const tops = new Set([...range.getClientRects()].map(rect => Math.round(rect.top)));
    tops.forEach(top => lines.add(top));
    if (tops.size > 1) broken.push(match[0]);
  }
  document.body.setAttribute("data-probe", JSON.stringify({broken, lines: lines.size}));
});
</script>"""


@needs_chromium
def test_no_number_breaks_across_lines_in_a_narrow_window(tmp_path):
    notebook = tmp_path / "numbers.ipynb"
    output = new_output("stream", name="stdout", text=NUMBERS_LINE + "\n")
    nbformat.write(new_notebook(cells=[new_code_cell("print(study.this_run())", outputs=[output])]), notebook)
    dom, requests = _browse(export_notebook(notebook), NUMBERS_PROBE, width=420)
    probe = json.loads(html.unescape(re.search(r'data-probe="([^"]*)"', dom).group(1)))
    assert probe["lines"] >= 4  # the line does wrap in 420 px
    assert probe["broken"] == []
    assert not requests


# ----------------------------------------------------------------------------- --student and attachments


@pytest.mark.parametrize("tag", ["solution", "Solution", "SOLUTIONS", "answer", "Answers"])
def test_student_pages_leave_out_cells_tagged_with_any_usual_spelling(tmp_path, tag):
    cells = [
        new_markdown_cell("the exercise"),
        new_code_cell("the_answer = 42", metadata={"tags": ["exercise", tag]}),
        new_markdown_cell("the worked solution", metadata={"tags": [tag]}),
    ]
    notebook = tmp_path / "class.ipynb"
    nbformat.write(new_notebook(cells=cells), notebook)
    assert main(["export", str(notebook), "--student"]) == 0
    page = notebook.with_name("class.student.html").read_text(encoding="utf-8")
    assert "the exercise" in page and "the_answer" not in page and "worked solution" not in page


def test_student_export_of_a_notebook_without_solutions_is_refused_naming_it(tmp_path, capsys):
    notebook = tmp_path / "plain.ipynb"
    nbformat.write(new_notebook(cells=[new_markdown_cell("no exercise", metadata={"tags": ["sol"]})]), notebook)
    with pytest.raises(ValueError, match=r"plain\.ipynb.*solution"):
        export_notebook(notebook, student=True)
    assert main(["export", str(notebook), "--student"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: NOTEBOOK ") and str(notebook) in error and error.count("\n") == 1
    assert sorted(tmp_path.iterdir()) == [notebook]  # nothing written


@pytest.mark.parametrize("assets_folder", [False, True], ids=["one-file", "assets-folder"])
def test_a_missing_attachment_is_one_error_naming_notebook_and_attachment(tmp_path, capsys, assets_folder):
    cells = [
        new_markdown_cell("fine"),
        new_markdown_cell("![chart](attachment:chart.png)", attachments={"other.png": {"image/png": "iVBORw0KGgo="}}),
    ]
    notebook = tmp_path / "attached.ipynb"
    nbformat.write(new_notebook(cells=cells), notebook)
    with pytest.raises(ValueError, match=r"attached\.ipynb: markdown cell 1 .*attachment:chart\.png"):
        export_notebook(notebook, assets_folder=assets_folder)
    argv = ["export", str(notebook)] + (["--assets-folder"] if assets_folder else [])
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "chart.png" in error and str(notebook) in error
    assert sorted(tmp_path.iterdir()) == [notebook]  # no page, no assets/


def test_a_page_that_cannot_be_written_is_one_error_and_leaves_nothing(tmp_path, capsys, monkeypatch):
    notebook = tmp_path / "full.ipynb"
    nbformat.write(new_notebook(cells=[new_markdown_cell("text")]), notebook)
    write_text = Path.write_text

    def full_disk(path, *args, **kwargs):
        if path.name.endswith(".partial"):
            write_text(path, "half a pa", encoding="utf-8")
            raise OSError(28, "No space left on device")
        return write_text(path, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full_disk)
    assert main(["export", str(notebook)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "full.html" in error and "No space left" in error
    assert sorted(tmp_path.iterdir()) == [notebook]  # no page, no half page: a retry is not refused


# ----------------------------------------------------------------------------- live panels


START_PROBE = """<script>
window.addEventListener("load", () => setTimeout(() => {
  const gd = [...document.querySelectorAll(".js-plotly-plot")].find(plot => plot.layout.sliders);
  const slider = gd.layout.sliders[0];
  const note = gd.closest(".jp-OutputArea-child").nextElementSibling;
  document.body.setAttribute("data-probe", JSON.stringify({
    label: slider.steps[slider.active].label, z: gd._fullData.map(trace => trace.z.map(row => Array.from(row))),
    note: note ? note.textContent : ""}));
}, 1000));
</script>"""


@needs_chromium
def test_a_live_panels_page_starts_its_slider_where_the_cell_began_and_says_so(tmp_path):
    # the teacher ran the cell at epsilon = 0.3 and moved the live slider to 0.6 before saving: the page draws the
    # figure the cell displayed, at 0.3, and says that it starts there
    from workbench.losses.pcl import pcl_weight_matrix
    from workbench.runs.export import LIVE_PANEL_NOTE

    panel = PclWeightsPanel(variants=("weighted",), epsilon=0.3, interactive=False)
    live = {"application/vnd.jupyter.widget-view+json": {"model_id": "7", "version_major": 2, "version_minor": 0}}
    live.update(PageLoadsPlotlyRenderer().to_mimebundle(panel.page_figure().to_dict()))
    cell = new_code_cell("PclWeightsPanel(epsilon=epsilon).display()", outputs=[new_output("display_data", data=live)])
    state = {"7": {"model_name": "FloatSliderModel", "state": {"value": 0.6}}}  # as JupyterLab saves it
    notebook = new_notebook(cells=[cell])
    notebook.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": state}}
    nbformat.write(notebook, tmp_path / "class.ipynb")
    dom = _rendered_dom(export_notebook(tmp_path / "class.ipynb"), START_PROBE)
    probe = json.loads(html.unescape(re.search(r'data-probe="([^"]*)"', dom).group(1)))
    assert probe["label"] == "0.3"
    np.testing.assert_allclose(probe["z"][0], pcl_weight_matrix("weighted", 0.3).numpy(), rtol=1e-6)
    assert "start where the cell" in probe["note"] and "start where the cell" in LIVE_PANEL_NOTE


def test_machine_paths_become_relative_to_the_run_folder_or_named():
    from workbench.runs.export import relative_paths

    places = [("/home/t/outputs/run-1", "."), ("/data/root", "$WORKBENCH_DATA"), ("/home/t", "~")]
    text = 'output_dir = "/home/t/outputs/run-1/05_x" in /home/t/outputs/run-1; /data/root/qbqtc/dev.json, /home/tim'
    assert relative_paths(text, places) == 'output_dir = "05_x" in .; $WORKBENCH_DATA/qbqtc/dev.json, /home/tim'
    assert relative_paths("/home/t/notes and /home/t/outputs/run-10", places) == "~/notes and ~/outputs/run-10"
