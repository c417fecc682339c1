"""The live slider panels in a real JupyterLab, drawn by headless Chromium: each figure takes the cell's width and
no two of its titles overlap (a plotly FigureWidget kept plotly's default 700 px of a wider cell, where three panels'
x-axis titles ran into each other). Slow: it starts a JupyterLab server and a kernel."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from devtools import CHROMIUM, Page, free_port, wait
from nbformat.v4 import new_code_cell, new_notebook

ROOT = Path(__file__).resolve().parents[1]
PANELS = [
    # notebook 05's panel and notebook 01's (two rows: a positive and a negative example)
    'LossCurvePanel([LinkedCurve("ce", label="CE"), LinkedCurve("focal", linked=("gamma",), label="FL (gamma)"),\n'
    '                LinkedCurve("dsc", linked=("alpha",), fixed={"gamma": 1.0}, label="DSC (alpha)")],\n'
    '               slider_names=("gamma", "alpha"), derivative=("dloss_dp", "dloss_dlogit")).display()',
    'LossCurvePanel([LinkedCurve("ce", label="CE"), LinkedCurve("focal", linked=("gamma",), label="FL"),\n'
    '                LinkedCurve("tversky", linked=("alpha", "beta"), label="TL")],\n'
    '               slider_names=("gamma", "alpha", "beta"), derivative=("dloss_dp", "dloss_dlogit")).display()',
    'PclWeightsPanel(variants=("reference", "paper", "weighted", "expected_cost")).display()',
    "EntropyPanel(n_max=20, gamma=0.1).display()",
]
# every plot in the outputs: the output's and the drawn figure's width, and the pairs of titles, axis titles and
# legend entries whose boxes overlap
FACTS = """(() => {
  const box = (e) => e.getBoundingClientRect();
  const overlap = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
  return [...document.querySelectorAll('.jp-OutputArea-output .js-plotly-plot')].map((plot) => {
    const texts = [...plot.querySelectorAll('.g-xtitle text, .g-ytitle text, .annotation-text, .legendtext, .gtitle')]
      .filter((e) => e.textContent);
    const clashes = [];
    texts.forEach((a, i) => texts.slice(i + 1).forEach((b) => {
      if (overlap(box(a), box(b))) clashes.push([a.textContent, b.textContent]);
    }));
    return {output: box(plot.closest('.jp-OutputArea-output')).width,
            figure: box(plot.querySelector('.main-svg')).width, clashes};
  });
})()"""


@pytest.mark.slow
@pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"), reason="needs Chromium (Debian: apt-get install chromium)"
)
@pytest.mark.parametrize("width", [1280, 1024])
def test_live_panels_take_the_cells_width_and_no_titles_overlap(tmp_path, width):
    assert CHROMIUM is not None, "CI is set and no Chromium is installed (.ci/run installs Debian's chromium)"
    cells = [new_code_cell("from workbench.viz import EntropyPanel, LinkedCurve, LossCurvePanel, PclWeightsPanel")]
    kernelspec = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook = new_notebook(
        cells=cells + [new_code_cell(panel) for panel in PANELS], metadata={"kernelspec": kernelspec}
    )
    nbformat.write(notebook, tmp_path / "panels.ipynb")
    lab_port, debug_port = free_port(), free_port()
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    lab = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--allow-root",
            f"--port={lab_port}",
            "--ServerApp.token=workbench",
            "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: run all cells from the page
            f"--ServerApp.root_dir={tmp_path}",
        ],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    with tempfile.TemporaryDirectory() as profile:
        browser = subprocess.Popen(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                f"--user-data-dir={profile}",
                f"--remote-debugging-port={debug_port}",
                f"--window-size={width},1000",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            api = f"http://127.0.0.1:{lab_port}/api/status?token=workbench"
            wait(lambda: _status(api), 60, "JupyterLab")
            page = Page(debug_port)
            page.call("Page.navigate", url=f"http://127.0.0.1:{lab_port}/lab/tree/panels.ipynb?token=workbench")
            ready = "!!(window.jupyterapp && document.querySelectorAll('.jp-Notebook .jp-Cell').length === 5)"
            wait(lambda: page.evaluate(ready), 120, "the notebook")
            kernel = "document.querySelector('.jp-Notebook-ExecutionIndicator')?.dataset?.status === 'idle'"
            wait(lambda: page.evaluate(kernel), 120, "the kernel")
            # started, not awaited: the command's promise settles only when every cell has run, which on a busy
            # machine outlasts the socket's timeout; the wait below polls for the drawn panels instead
            page.evaluate("void window.jupyterapp.commands.execute('notebook:run-all-cells')")
            drawn = (
                f"document.querySelectorAll('.jp-OutputArea-output .js-plotly-plot .main-svg').length >= {len(PANELS)}"
            )
            wait(lambda: page.evaluate(drawn), 300, "the panels")
            time.sleep(2)  # the last relayout
            facts = page.evaluate(FACTS)
        finally:
            browser.kill()
            lab.terminate()
            lab.wait(30)
    assert len(facts) == len(PANELS), facts
    for plot in facts:
        assert plot["figure"] >= plot["output"] - 2, facts  # the cell's width
        assert plot["clashes"] == [], facts


def _status(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=2)
    except OSError:
        return False
    return True
