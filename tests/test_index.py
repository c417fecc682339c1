"""A run's index.html: it orients (what the workbench is, where to start), its tables fit a 1280 px window, its
figures carry the notebook's captions, the sweep figures have titled axes, and a run of hundreds of figures loads
one plotly.js and draws only the figures near the window (headless Chromium)."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import plotly.graph_objects as go
import pytest

from workbench.runs.assets import ensure_assets
from workbench.runs.execute import Outcome
from workbench.runs.options import cell_slug
from workbench.runs.plan import Execution
from workbench.runs.report import START_HERE, notebook_title, write_report
from workbench.viz import figures

ROOT = Path(__file__).resolve().parents[1]
WALKTHROUGH = ROOT / "notebooks" / f"{START_HERE}.ipynb"
CHROMIUM = next(
    (shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome") if shutil.which(name)), None
)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"),
    reason="needs Chromium (Debian: apt-get install chromium); runs in CI",
)


def _outcome(run_dir: Path, notebook: Path, point: dict, metrics: dict, figures_saved: int = 0) -> Outcome:
    """An ok execution of ``notebook`` at ``point`` with ``metrics`` and ``figures_saved`` small saved figures."""
    slug = cell_slug(point) if point else ""
    folder = run_dir / notebook.stem / slug
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{notebook.stem}.html").write_text("<p>page</p>", encoding="utf-8")
    for index in range(figures_saved):
        figure = go.Figure(go.Bar(x=["a", "b"], y=[index, 1]), layout={"title": f"Bars {index}", "height": 300})
        caption = f"How often each of a and b occurs, figure {index}." if index % 2 == 0 else None
        figures.save(figure, f"bars_{index}", folder / "figures", caption=caption)
    execution = Execution(notebook, dict(point), dict(point), slug)
    return Outcome(execution, folder, "ok", 1.0, metrics=metrics)


def _sections(index: str) -> list[str]:
    return re.findall(r'<section id="([^"]+)">', index)


def test_the_index_says_what_the_workbench_is_and_where_to_start(tmp_path):
    metrics = {"metrics": {"macro_f1": {"mean": 0.5, "std": 0.1, "n": 3}}}
    outcomes = [
        _outcome(tmp_path, ROOT / "notebooks" / "01_dice_loss.ipynb", {}, metrics),
        _outcome(tmp_path, WALKTHROUGH, {}, metrics, figures_saved=2),
    ]
    index = write_report(tmp_path, outcomes).read_text(encoding="utf-8")
    assert _sections(index) == ["about", "executions", "metrics", "figures"]
    for section in _sections(index):
        assert f'<a href="#{section}">' in index  # the contents line links every section
    about = index[index.index('<section id="about">') : index.index('<section id="executions">')]
    assert "Imbalance Workbench" in about and "Start here" in about
    assert f'href="{START_HERE}/{START_HERE}.html"' in about  # the walkthrough's page, linked
    for notebook in (WALKTHROUGH, ROOT / "notebooks" / "01_dice_loss.ipynb"):
        assert html.escape(notebook_title(notebook)) in about
    assert notebook_title(WALKTHROUGH).startswith("05")  # the notebook's own heading, not its file name


def test_figures_are_captioned_by_the_notebook_else_by_their_title(tmp_path):
    outcome = _outcome(tmp_path, WALKTHROUGH, {}, {"metrics": {}}, figures_saved=2)
    index = write_report(tmp_path, [outcome]).read_text(encoding="utf-8")
    figures_part = index[index.index('<section id="figures">') :]
    captions = re.findall(r"<figcaption>(.*?) \(<a href=\"([^\"]+)\">page</a>\)</figcaption>", figures_part)
    assert captions == [
        ("How often each of a and b occurs, figure 0.", f"{START_HERE}/figures/bars_0.html"),
        ("Bars 1", f"{START_HERE}/figures/bars_1.html"),
    ]
    assert "<iframe" not in index and "<script src=" not in index  # its own plotly.js, inlined


def test_metrics_are_a_long_table_and_the_wide_table_is_folded(tmp_path):
    many = {f"metric_{index}": {"mean": index / 40, "std": 0.01, "n": 5} for index in range(30)}
    outcome = _outcome(tmp_path, WALKTHROUGH, {}, {"metrics": many, "descriptions": {"metric_3": "a described one"}})
    index = write_report(tmp_path, [outcome]).read_text(encoding="utf-8")
    metrics_part = index[index.index('<section id="metrics">') : index.index('<section id="figures">')]
    long_table = metrics_part[: metrics_part.index("All executions")]
    assert re.findall(r"<th>([^<]*)</th>", long_table) == ["metric", "mean ± std (n)", "description"]
    assert "<td>0.075 ± 0.01 (5)</td>" in long_table and "<td>a described one</td>" in long_table
    wide = metrics_part[metrics_part.index("All executions") :]
    assert '<div class="scroll">' in wide and "metric.metric_29" in wide  # summary.csv's columns, folded


def test_sweep_figures_have_titled_axes_and_rates_within_0_and_1(tmp_path):
    outcomes = []
    for epsilon, f1, gap in ((0.1, 0.62, -0.3), (0.2, 0.7, 0.4)):
        metrics = {"f1": {"mean": f1, "std": 0.05, "n": 3}, "gap": {"mean": gap, "std": 0.1, "n": 3}}
        outcomes.append(_outcome(tmp_path, WALKTHROUGH, {"epsilon": epsilon}, {"metrics": metrics}))
    index = write_report(tmp_path, outcomes, ["epsilon"]).read_text(encoding="utf-8")
    assert _sections(index) == ["about", "executions", "sweep", "metrics", "figures"]
    drawn = {}
    for text in re.findall(r'<script type="application/json" id="sweep-\d+">(.*?)</script>', index):
        layout = json.loads(text)["layout"]
        drawn[layout["yaxis"]["title"]["text"]] = layout
    assert sorted(drawn) == ["f1", "gap"]
    for layout in drawn.values():
        assert layout["xaxis"]["title"]["text"] == "epsilon"
    assert drawn["f1"]["yaxis"]["range"] == [0.0, 1.0]  # an F1: the whole scale, not -0.5 ... 1
    assert "range" not in drawn["gap"]["yaxis"]  # a difference may be negative: plotly's own range


def _probe(page: Path, script: str, width: int = 1280, height: int = 900) -> dict:
    """What ``script`` (run after the page's scripts) puts in ``document.body.dataset.probe``, as JSON, in headless
    Chromium ``width`` x ``height`` with every http(s) request sent to a closed port."""
    assert CHROMIUM is not None, "CI is set and no Chromium is installed (.ci/run installs Debian's chromium)"
    probed = page.with_name(f"{page.stem}.probe.html")
    probed.write_text(page.read_text(encoding="utf-8").replace("</body>", script + "</body>"), encoding="utf-8")
    with tempfile.TemporaryDirectory() as profile:
        completed = subprocess.run(
            [
                CHROMIUM,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                f"--user-data-dir={profile}",
                "--proxy-server=http://127.0.0.1:9",
                f"--window-size={width},{height}",
                "--virtual-time-budget=30000",
                "--dump-dom",
                probed.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert completed.returncode == 0, completed.stderr[-2000:]
    return json.loads(html.unescape(re.search(r'data-probe="([^"]*)"', completed.stdout).group(1)))


# opens every folded part, scrolls to SCROLL (before the first frame: headless Chromium draws few frames, so the
# page is probed where it first shows), then reads the page's width and which plots the page drew
LAYOUT_PROBE = """<script>
document.querySelectorAll("details").forEach((part) => { part.open = true; });
window.scrollTo(0, SCROLL);
setTimeout(() => {
  const plots = [...document.querySelectorAll("div.plot")];
  document.body.dataset.probe = JSON.stringify({
    scrollWidth: document.documentElement.scrollWidth, clientWidth: document.documentElement.clientWidth,
    plots: plots.length, drawn: plots.map((plot, i) => plot.dataset.drawn ? i : -1).filter((i) => i >= 0)});
}, 2000);
</script>"""


@needs_chromium
def test_a_sweep_of_hundreds_of_figures_fits_1280_px_and_draws_only_those_near_the_window(tmp_path):
    ensure_assets(tmp_path)
    outcomes = []
    for index in range(40):
        point = {"epsilon": round(0.01 * (index + 1), 2), "note": "a_long_unbroken_value_" * 3}
        metrics = {"metrics": {f"metric_{m}": {"mean": 0.5, "std": 0.1, "n": 3} for m in range(12)}}
        outcomes.append(_outcome(tmp_path, WALKTHROUGH, point, metrics, figures_saved=6))
    outcomes[3].status, outcomes[3].error = "failed", "ValueError: " + "x" * 400  # a long unbroken error
    page = write_report(tmp_path, outcomes, ["epsilon", "note"])
    top = _probe(page, LAYOUT_PROBE.replace("SCROLL", 'document.getElementById("sweep").offsetTop'))
    assert top["scrollWidth"] <= top["clientWidth"] <= 1280, top  # no horizontal scroll bar
    assert top["plots"] == 12 + 40 * 6  # each metric against epsilon, each saved figure (a failed run's too)
    assert top["drawn"] == [*range(len(top["drawn"]))] and 0 < len(top["drawn"]) < 20, top  # near the window only
    end = _probe(page, LAYOUT_PROBE.replace("SCROLL", "document.documentElement.scrollHeight"))
    assert end["drawn"] == [*range(252 - len(end["drawn"]), 252)] and 0 < len(end["drawn"]) < 20, end  # the last
