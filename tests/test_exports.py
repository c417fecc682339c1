"""Offline HTML exports: a notebook's page is one self-contained file (plotly.js and MathJax inlined); a run's
figure pages share one plotly.js by a relative path; no remote script, stylesheet or font; no link, class, id or
style from TeX; ``python -m workbench export`` (``--assets-folder``: the folder form). In headless Chromium, the
page alone in an empty folder and with every request recorded: equations typeset, figures drawn, a slider panel's
plotly slider moved, nothing asked of any server. The browser tests skip only where no Chromium is installed and
CI is unset (in CI they fail)."""

from __future__ import annotations

import html
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlparse

import nbformat
import numpy as np
import plotly.graph_objects as go
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell
from plotly.offline import get_plotlyjs

from workbench.__main__ import main
from workbench.losses.pcl import pcl_weight_matrix
from workbench.runs import run
from workbench.runs.assets import (
    ASSETS_DIR,
    MATHJAX_DIR,
    PLOTLY_JS,
    PLOTLY_MISSING_CLASS,
    RunAssets,
    ensure_assets,
    inline_mathjax_js,
    inline_plotly_js,
    link_figures,
    run_dir_of,
)
from workbench.runs.export import WIDGET_VIEW, export_html
from workbench.viz import figures

FIXTURE = Path(__file__).parent / "fixtures" / "notebooks" / "ok_metrics.ipynb"
# Equations as notebooks 02-04 write them: \tag, cases, \operatorname, \mathbb, \text, \frac, sums.
# Each equation is one line of the markdown; the pieces below are joined without a line break.
EQUATIONS = (
    "## Equations as the notebooks write them\n\n"
    r"Label smoothing $\mathrm{LS}_i = -\sum_k q_k \log p_{ik}$ with $z \in \mathbb{R}^{K+n}$ and "
    r"$\operatorname{round}(p\,n)$,"
    "\n\n"
    r"$$\mathrm{PCL}^{+} = \frac{n_0}{n_1 + n_2}\ \text{(eq. 2)}\quad\text{or}\quad \frac{n_1+n_2}{n_0}\ "
    r"\text{(code)}, \qquad \mathrm{PCL}^{-} = \frac{n_0 + n_2}{n_1} \tag{2, 3}$$"
    "\n\n"
    r"$$\mathcal{L}_i = \begin{cases}\mathrm{LS}_i + \mathrm{PCL}^{+} & \text{far mistake}\\ "
    r"\mathrm{LS}_i - \mathrm{PCL}^{-} & \text{near mistake}\\ \mathrm{LS}_i & \text{correct}\end{cases} \tag{4}$$"
    "\n\n"
    r"$$\mathcal{L}_{\text{SR}} = \mathcal{L}_{\text{MLM}} + \lambda\,\frac{1}{|\mathcal{M}|}"
    r"\sum_{i\in\mathcal{M}} \bigl(1 - \cos(e(y_i), e(r_i))\bigr). \tag{3}$$"
    "\n"
)
INLINE_EQUATIONS, DISPLAY_EQUATIONS = 3, 3
# Text a notebook shows (a data row, a parameter) that MathJax typesets: none may become a link, a
# class, an id, a style, an event handler or a loaded script.
PAYLOADS = [
    r"$\href{javascript:alert(1)}{X}$",
    r"$\href{JaVaScRiPt:alert(2)}{X}$",
    "$\\href{java\tscript:alert(3)}{X}$",  # browsers drop the tab: javascript:
    r"$\href{data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==}{X}$",
    r"$\href{https://example.org}{X}$",
    r"$\mmlToken{mi}[href='javascript:alert(5)']{X}$",
    r"$\class{wbevil}{X}$",
    r"$\cssId{wbevilid}{X}$",
    r"$\style{position:fixed;top:0;left:0}{X}$",
    r"$\data{onclick=alert(6)}{X}$",
    r"$\unicode{x41}$",
    r"$\require{action}$",
    r"\(\href{javascript:alert(7)}{X}\)",  # the other delimiters
    r"$$\href{javascript:alert(8)}{X}$$",
    r"$\bbox[position:fixed;top:0;left:0]{X}$",  # a style through \bbox
    r"$\toggle{\href{javascript:alert(9)}{X}}{Y}\endtoggle$",
]
PAYLOAD_CELL = f"""import pandas as pd
from IPython.display import Markdown, display

print("PAYLOADS-START")
pd.set_option("display.max_colwidth", None)
display(pd.DataFrame({{"text": {PAYLOADS!r}}}))
display(Markdown("parameter: " + {PAYLOADS[0]!r}))"""
PANEL_CELL = """from workbench.viz import PclWeightsPanel

PclWeightsPanel(variants=("weighted", "expected_cost"), interactive=False, name="pcl_panel").display()"""
# The same panel live, as JupyterLab runs it: its output carries the page figure beside the widget.
LIVE_PANEL_CELL = PANEL_CELL.replace("interactive=False", "interactive=True").replace("pcl_panel", "live_panel")
SOLUTION = "the solution of the exercise"
CHROMIUM = next(
    (shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome") if shutil.which(name)), None
)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("CI"),
    reason="needs Chromium (Debian: apt-get install chromium); runs in CI",
)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A real run of the fixture notebook with cells of equations, of MathJax payloads in data, a slider
    panel and a solution, at one sweep point (so pages sit two and three folders below the run folder)."""
    root = tmp_path_factory.mktemp("exports")
    notebook = nbformat.read(FIXTURE, as_version=4)
    notebook.cells.insert(1, new_markdown_cell(EQUATIONS, id="ok-equations"))
    notebook.cells.append(new_code_cell(PAYLOAD_CELL, id="payloads"))
    notebook.cells.append(new_code_cell(PANEL_CELL, id="panel"))
    notebook.cells.append(new_code_cell(LIVE_PANEL_CELL, id="live-panel"))
    notebook.cells.append(new_markdown_cell(SOLUTION, id="solution", metadata={"tags": ["solution"]}))
    (root / "notebooks").mkdir()
    nbformat.write(notebook, root / "notebooks" / FIXTURE.name)
    (root / "params" / "default").mkdir(parents=True)  # the params set (a missing one is refused)
    report = run(
        notebooks_dir=root / "notebooks",
        params_dir=root / "params",
        outputs_dir=root / "outputs",
        sweep={"x": [2.0]},
        stream=io.StringIO(),
    )
    assert not report.failed, report.failed[0].status_text()
    return report.run_dir


def _cell(run_dir: Path) -> Path:
    return run_dir / "ok_metrics" / "x=2.0"


def _pages(run_dir: Path) -> list[Path]:
    cell = _cell(run_dir)
    return [cell / "ok_metrics.html", cell / "figures" / "score_line.html", run_dir / "index.html"]


@pytest.fixture(scope="module")
def alone(run_dir, tmp_path_factory) -> Path:
    """The runner's page of the notebook, copied alone into an empty folder (as if e-mailed)."""
    page = tmp_path_factory.mktemp("alone") / "ok_metrics.html"
    shutil.copyfile(_cell(run_dir) / "ok_metrics.html", page)
    return page


class _References(HTMLParser):
    """What a page loads: script and link URLs, CSS url()/@import targets, and URLs in inline scripts."""

    _CSS_URL = re.compile(r"""url\(\s*['"]?([^'")]+)|@import\s+['"]([^'"]+)""")

    def __init__(self) -> None:
        super().__init__()
        self.loaded: list[str] = []  # src/href of <script>, <link>, <img>, <iframe>, CSS urls
        self.inline_script_urls: list[str] = []
        self._in = None

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag in ("script", "img", "iframe") and attributes.get("src"):
            self.loaded.append(attributes["src"])
        if tag == "link" and attributes.get("href"):
            self.loaded.append(attributes["href"])
        self.loaded += self._css_urls(attributes.get("style") or "")
        self._in = tag if tag in ("script", "style") else None

    def handle_endtag(self, tag):
        self._in = None

    def handle_data(self, data):
        if self._in == "style":
            self.loaded += self._css_urls(data)
        elif self._in == "script":
            self.inline_script_urls += re.findall(r"https?://[^\s'\"<>]+", data)

    def _css_urls(self, css: str) -> list[str]:
        return [url or imported for url, imported in self._CSS_URL.findall(css)]


def _references(page: Path) -> _References:
    """What ``page`` loads, its inlined plotly.js and MathJax left out: their sources name URLs (map tiles, a CDN
    for speech) that a page of ours never makes them fetch, which the browser tests check."""
    parser = _References()
    text = page.read_text(encoding="utf-8")
    parser.feed(text.replace(inline_plotly_js(), "").replace(inline_mathjax_js(), ""))
    return parser


# ----------------------------------------------------------------------------- the run folder


def test_run_folder_holds_one_plotly_js_for_its_figure_pages(run_dir):
    assets = RunAssets(run_dir / ASSETS_DIR)
    assert sorted(run_dir.rglob(PLOTLY_JS)) == [assets.plotly_js]  # not one per figures/ folder
    assert assets.plotly_js.read_text(encoding="utf-8") == get_plotlyjs()
    assert not (assets.root / MATHJAX_DIR).exists()  # only the notebook's page typesets, and it holds MathJax


@pytest.mark.parametrize("page", [0, 1, 2], ids=["export", "figure", "index"])
def test_pages_load_nothing_remote_and_every_local_reference_exists(run_dir, page):
    path = _pages(run_dir)[page]
    references = _references(path)
    remote = [url for url in references.loaded if urlparse(url).scheme in ("http", "https") or url.startswith("//")]
    assert not remote, f"{path.name} loads {remote}"
    assert not references.inline_script_urls, f"{path.name}: inline scripts name {references.inline_script_urls}"
    for url in references.loaded:
        if urlparse(url).scheme == "" and not url.startswith("#"):
            assert (path.parent / unquote(url)).is_file(), f"{path.name}: {url} does not exist"


def test_the_notebooks_page_is_self_contained_and_figure_pages_share_plotly_js(run_dir):
    export, figure, _ = _pages(run_dir)
    assert all(url.startswith(("data:", "#")) for url in _references(export).loaded)  # the theme's fonts: data URLs
    page = export.read_text(encoding="utf-8")
    assert inline_plotly_js() in page and inline_mathjax_js() in page  # MathJax with its safe extension
    assert _references(figure).loaded == ["../../../assets/plotly.min.js"]


def test_the_index_is_self_contained(run_dir):
    index = run_dir / "index.html"
    assert inline_plotly_js() in index.read_text(encoding="utf-8")
    assert not [url for url in _references(index).loaded if not url.startswith(("data:", "#"))]


def test_executed_notebook_and_export_stay_small(run_dir):
    # before the shared assets each carried plotly.js: 4.8 MB (.ipynb) and 4.9 MB (.html)
    cell = _cell(run_dir)
    notebook = nbformat.read(cell / "ok_metrics.ipynb", as_version=4)
    outputs = [output for c in notebook.cells for output in c.get("outputs", []) if "data" in output]
    plotly_outputs = [output for output in outputs if "application/vnd.plotly.v1+json" in output.data]
    assert len(plotly_outputs) == 2  # the line and the panel; JupyterLab draws them with its plotly extension
    for output in plotly_outputs:
        html_text = output.data["text/html"]
        assert "Plotly.newPlot" in html_text and "<script src" not in html_text and "http" not in html_text
    notebook.metadata.pop(
        "widgets"
    )  # the live panel's FigureWidget state (5 MB), as JupyterLab saves it; no page holds it
    assert len(nbformat.writes(notebook)) < 150_000  # the panels' 12 precomputed steps included
    scripts = len(inline_plotly_js().encode()) + len(inline_mathjax_js().encode())
    assert (cell / "ok_metrics.html").stat().st_size < scripts + 1_000_000  # one plotly.js, one MathJax: no more


def test_the_page_configures_mathjax_safe(run_dir):
    page = (_cell(run_dir) / "ok_metrics.html").read_text(encoding="utf-8")
    config = json.loads(re.search(r"window\.MathJax = (\{.*?\});</script>", page).group(1))
    assert config["loader"]["load"] == []  # MathJax's safe extension, which filters what TeX may set, is inlined
    assert config["options"]["safeOptions"]["allow"] == {
        "URLs": "none",
        "classes": "safe",
        "cssIDs": "safe",
        "styles": "safe",
    }
    assert config["tex"]["packages"] == {"[-]": ["require"]}  # \require would load more code


# ----------------------------------------------------------------------------- the helpers


def test_run_dir_of_follows_the_runner_layout(tmp_path):
    assert run_dir_of(tmp_path / "run" / "nb" / "nb.ipynb") == (tmp_path / "run").resolve()
    assert run_dir_of(tmp_path / "run" / "nb" / "x=1" / "nb.ipynb") == (tmp_path / "run").resolve()
    assert run_dir_of(tmp_path / "out" / "nb.ipynb") == (tmp_path / "out").resolve()  # papermill by hand


def test_link_figures_points_standalone_pages_at_the_shared_copy(tmp_path):
    figures_dir = tmp_path / "run" / "nb" / "figures"
    for name in ("a", "b"):
        figures.save(go.Figure(go.Bar(y=[1, 2])), name, directory=figures_dir)
    assert (figures_dir / PLOTLY_JS).is_file()  # a standalone folder: its own copy
    assets = ensure_assets(tmp_path / "run")
    assert link_figures(figures_dir, assets) == [figures_dir / "a.html", figures_dir / "b.html"]
    assert not (figures_dir / PLOTLY_JS).exists()
    for name in ("a", "b"):
        assert _references(figures_dir / f"{name}.html").loaded == ["../../assets/plotly.min.js"]
    assert link_figures(figures_dir, assets) == []  # already linked


def test_export_html_outside_a_run_keeps_the_figures_plotly_js_beside_it(run_dir, tmp_path):
    notebook = tmp_path / "exported.ipynb"
    shutil.copyfile(_cell(run_dir) / "ok_metrics.ipynb", notebook)
    target = export_html(notebook)
    assert target == tmp_path / "exported.html"
    assert not [url for url in _references(target).loaded if not url.startswith(("data:", "#"))]
    assert (tmp_path / "assets" / PLOTLY_JS).is_file()  # for the figures/ pages and index.html of a run


# ----------------------------------------------------------------------------- a real browser


class _VisibleText(HTMLParser):
    """The text a reader sees: everything but scripts, styles, SVG drawings and MathJax's hidden MathML."""

    _HIDDEN = {"script", "style", "svg", "mjx-assistive-mml", "head", "template", "noscript"}

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag, attrs):
        self._hidden += tag in self._HIDDEN

    def handle_endtag(self, tag):
        self._hidden -= tag in self._HIDDEN

    def handle_data(self, data):
        if not self._hidden:
            self.parts.append(data)


# Chromium's own calls (component update, sign-in), made for a blank page too: not the page's.
BROWSER_OWN = re.compile(r"^(CONNECT |POST |GET )(https?://)?(update\.googleapis\.com|accounts\.google\.com)[:/]")


class _Recorder(BaseHTTPRequestHandler):
    """A proxy that answers every request with 502 and records it: the browser's only way to a network."""

    def _refuse(self) -> None:
        request = f"{self.command} {self.path}"
        if not BROWSER_OWN.match(request):
            self.server.requests.append(request)
        self.send_error(502)

    do_GET = do_POST = do_HEAD = do_PUT = do_OPTIONS = do_CONNECT = _refuse

    def log_message(self, *args) -> None:
        pass


def _browse(page: Path, script: str | None = None, width: int = 1280) -> tuple[str, list[str]]:
    """The page's DOM after its scripts (and ``script``, added at the end of a copy of the page) ran in headless
    Chromium ``width`` pixels wide, and every request it sent to the network (all go to a recording proxy)."""
    assert CHROMIUM is not None, "CI is set and no Chromium is installed (.ci/run installs Debian's chromium)"
    if script is not None:
        probed = page.with_name(f"{page.stem}.probe.html")
        probed.write_text(page.read_text(encoding="utf-8").replace("</body>", script + "</body>"), encoding="utf-8")
        page = probed
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    proxy.requests = []
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    try:
        with tempfile.TemporaryDirectory() as profile:
            completed = subprocess.run(
                [
                    CHROMIUM,
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-quic",
                    "--no-first-run",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--disable-features=NetworkTimeServiceQuerying",
                    f"--user-data-dir={profile}",
                    f"--proxy-server=http://127.0.0.1:{proxy.server_address[1]}",
                    "--proxy-bypass-list=<-loopback>",
                    f"--window-size={width},1000",
                    "--virtual-time-budget=30000",
                    "--dump-dom",
                    page.as_uri(),
                ],
                capture_output=True,
                text=True,
                timeout=120,
            )
    finally:
        proxy.shutdown()
        proxy.server_close()
    assert completed.returncode == 0, completed.stderr[-2000:]
    return completed.stdout, proxy.requests


def _rendered_dom(page: Path, script: str | None = None) -> str:
    """The page's DOM as :func:`_browse` gives it; the page asked no server for anything."""
    dom, requests = _browse(page, script)
    assert not requests, f"{page.name} sent {requests}"
    return dom


def _main(dom: str) -> str:
    """The notebook's part of a page's DOM (not the scripts and styles of its head)."""
    return dom[dom.index("<main>") :]


@needs_chromium
def test_the_page_alone_renders_equations_and_figures_offline_in_chromium(alone):
    assert sorted(path.name for path in alone.parent.iterdir()) == ["ok_metrics.html"]
    dom = _main(_rendered_dom(alone))
    equations = dom[: dom.index("PAYLOADS-START")]
    containers = re.findall(r"<mjx-container\b[^>]*>", equations)
    assert len(containers) == INLINE_EQUATIONS + DISPLAY_EQUATIONS
    assert sum('display="true"' in tag for tag in containers) == DISPLAY_EQUATIONS
    assert 'jax="SVG"' in containers[0]
    assert not re.search(r'<[^>]*data-mml-node="merror"', equations)  # no MathJax error box (bad syntax)
    assert not re.search(r'<[^>]*data-mml-node="mtext"[^>]*fill="red"', equations)  # no undefined macro (drawn red)
    visible = _VisibleText()
    visible.feed(equations)
    text = "".join(visible.parts)
    assert "Equations as the notebooks write them" in text
    for raw in ("$$", "\\frac", "\\begin{cases}", "\\tag", "\\mathrm"):
        assert raw not in text, f"raw LaTeX {raw!r} left in the visible text"
    assert len(re.findall(r'class="main-svg"', dom)) >= 4  # plotly drew both figure outputs


class _Attributes(HTMLParser):
    """Every element's attributes, and the tags found inside MathJax's output."""

    def __init__(self) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict]] = []
        self.in_math: list[str] = []
        self._math = 0

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, {name: value or "" for name, value in attrs}))
        if self._math:
            self.in_math.append(tag)
        self._math += tag == "mjx-container"

    def handle_endtag(self, tag):
        self._math -= tag == "mjx-container"


@needs_chromium
def test_tex_in_shown_text_makes_no_link_class_id_style_or_script(alone):
    dom = _rendered_dom(alone)
    payloads = dom[dom.index("PAYLOADS-START") :]
    assert (
        len(re.findall(r"<mjx-container\b", payloads)) == len(PAYLOADS) + 1
    )  # each data row and the parameter typeset
    parsed = _Attributes()
    parsed.feed(dom)
    assert "a" not in parsed.in_math  # no link from TeX at all
    for tag, attributes in parsed.elements:
        for name, value in attributes.items():
            url = re.sub(r"[\x00-\x20]", "", value).lower()  # what a browser's URL parser reads
            if name in ("href", "xlink:href", "src", "action"):  # plotly draws heatmaps as <image>s of data: URLs
                assert not url.startswith("javascript:") and not (tag == "a" and url.startswith("data:")), (tag, value)
            assert not name.startswith("on") and name != "data-onclick", (tag, name)
        assert "wbevil" not in attributes.get("class", "") and attributes.get("id") != "wbevilid", (tag, attributes)
        assert "fixed" not in attributes.get("style", ""), (tag, attributes)  # MathJax itself sets position: relative
    scripts = [attributes["src"] for tag, attributes in parsed.elements if tag == "script" and "src" in attributes]
    assert scripts == []  # \require loaded nothing (and _rendered_dom saw no request)


# A user moving the panel's plotly slider: a mouse press on the slider's rail, then release. Headless
# Chromium with a virtual time budget runs no animation frames, in which plotly.js applies a slider's
# step: they become timers. The result goes into the DOM as data-probe.
SLIDER_PROBE = """<script>
window.addEventListener("load", () => setTimeout(() => {
  window.requestAnimationFrame = callback => setTimeout(() => callback(performance.now()), 16);
  const gd = [...document.querySelectorAll(".js-plotly-plot")].filter(plot => plot.layout.sliders)[PLOT_INDEX];
  const z = () => gd._fullData.map(trace => trace.z.map(row => Array.from(row)));
  const probe = {before: z(), active_before: gd.layout.sliders[0].active};
  const rail = gd.querySelector(".slider-rail-touch-rect").getBoundingClientRect();
  const at = {bubbles: true, view: window, clientX: rail.left + 0.9 * rail.width, clientY: rail.top + rail.height / 2};
  gd.querySelector(".slider-rail-touch-rect").dispatchEvent(new MouseEvent("mousedown", at));
  gd.dispatchEvent(new MouseEvent("mouseup", at));
  setTimeout(() => {
    const slider = gd.layout.sliders[0];
    Object.assign(probe, {after: z(), active: slider.active, label: slider.steps[slider.active].label});
    document.body.setAttribute("data-probe", JSON.stringify(probe));
  }, 1000);
}, 1000));
</script>"""


@needs_chromium
@pytest.mark.parametrize(
    ("page", "plot"),
    [("alone", 0), ("figures/pcl_panel.html", 0), ("alone", 1)],
    ids=["export-alone", "figure", "export-alone-of-a-live-panel"],
)
def test_moving_a_panels_plotly_slider_redraws_the_figure_offline(run_dir, alone, page, plot):
    script = SLIDER_PROBE.replace("PLOT_INDEX", str(plot))
    path = alone if page == "alone" else _cell(run_dir) / page
    probe = json.loads(html.unescape(re.search(r'data-probe="([^"]*)"', _rendered_dom(path, script)).group(1)))
    assert probe["active"] != probe["active_before"]
    epsilon = float(probe["label"])
    assert epsilon > 0.5  # 0.9 of the rail: a late step (the panel starts at epsilon = 0.1)
    for variant, before, after in zip(("weighted", "expected_cost"), probe["before"], probe["after"]):
        np.testing.assert_allclose(before, pcl_weight_matrix(variant, 0.1).numpy(), rtol=1e-6)
        np.testing.assert_allclose(after, pcl_weight_matrix(variant, epsilon).numpy(), rtol=1e-6)


@needs_chromium
def test_the_index_copied_alone_draws_its_figures_offline_in_chromium(run_dir, tmp_path):
    index = tmp_path / "index.html"
    shutil.copyfile(run_dir / "index.html", index)
    dom = _rendered_dom(index)
    assert len(re.findall(r'class="main-svg"', dom)) >= 2  # plotly drew the figures near the window


@needs_chromium
@pytest.mark.parametrize("where", ["in the run folder", "copied alone"])
def test_a_figure_page_draws_in_its_run_folder_and_copied_alone_says_where_its_figure_is(run_dir, tmp_path, where):
    page = _cell(run_dir) / "figures" / "score_line.html"
    if where == "copied alone":
        page = Path(shutil.copyfile(page, tmp_path / page.name))
    dom = _rendered_dom(page)
    drawn = len(re.findall(r'class="main-svg"', dom))
    notices = re.findall(rf'<p class="{PLOTLY_MISSING_CLASS}">', dom)
    if where == "copied alone":
        assert (drawn, len(notices)) == (0, 1)
    else:
        assert drawn >= 1 and notices == []


def test_a_live_panels_page_shows_its_page_figure_not_an_empty_widget(run_dir):
    notebook = nbformat.read(_cell(run_dir) / "ok_metrics.ipynb", as_version=4)
    (live,) = [cell for cell in notebook.cells if cell.get("id") == "live-panel"]
    (output,) = [output for output in live.outputs if output.output_type == "display_data"]
    assert {WIDGET_VIEW, "text/html"} <= set(output.data)  # JupyterLab draws the widget, a page the figure
    assert '"sliders"' in output.data["text/html"]
    page = (_cell(run_dir) / "ok_metrics.html").read_text(encoding="utf-8")
    assert WIDGET_VIEW not in page and page.count('"sliders"') >= 2  # both panels, with their plotly sliders


# ----------------------------------------------------------------------------- python -m workbench export


@pytest.fixture
def executed(run_dir, tmp_path) -> Path:
    """A copy of the run's executed notebook, outside any run folder."""
    notebook = tmp_path / "nb" / "ok_metrics.ipynb"
    notebook.parent.mkdir()
    shutil.copyfile(_cell(run_dir) / "ok_metrics.ipynb", notebook)
    return notebook


def _error_line(capsys) -> str:
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and captured.err.startswith("error: "), captured.err
    return captured.err


def test_export_writes_the_runners_page_and_never_overwrites(executed, capsys):
    assert main(["export", str(executed)]) == 0
    page = executed.with_suffix(".html")
    assert capsys.readouterr().out.strip() == str(page)
    written = page.read_text(encoding="utf-8")
    assert sorted(executed.parent.iterdir()) == sorted([executed, page])  # one file: no assets/ beside it
    assert not [url for url in _references(page).loaded if not url.startswith(("data:", "#"))]
    assert SOLUTION in written and "PclWeightsPanel" in written
    assert main(["export", str(executed)]) == 2  # the page exists: refused, unchanged
    assert str(page) in _error_line(capsys)
    assert page.read_text(encoding="utf-8") == written


def test_export_force_replaces_an_existing_page_and_only_with_it(executed, capsys):
    page = executed.with_suffix(".html")
    page.write_text("an old page", encoding="utf-8")
    assert main(["export", str(executed)]) == 2
    assert "--force" in _error_line(capsys) and page.read_text(encoding="utf-8") == "an old page"
    assert main(["export", str(executed), "--force"]) == 0
    assert "PclWeightsPanel" in page.read_text(encoding="utf-8")
    assert sorted(path.name for path in page.parent.iterdir()) == ["ok_metrics.html", "ok_metrics.ipynb"]
    page.unlink()
    page.mkdir()  # a folder is never replaced
    assert main(["export", str(executed), "--force"]) == 2
    assert "not a file" in _error_line(capsys)


def test_a_page_shows_paths_relative_to_the_run_folder_not_this_machines(run_dir, tmp_path, capsys):
    # the student page showed output_dir = "/home/.../outputs/<run>/05_..."
    target = tmp_path / "class.html"
    assert main(["export", str(_cell(run_dir) / "ok_metrics.ipynb"), "--student", "-o", str(target)]) == 0
    text = html.unescape(re.sub(r"<[^>]+>", "", target.read_text(encoding="utf-8")))
    assert 'output_dir = "ok_metrics/x=2.0"' in text  # relative to the run folder
    for machine in {str(run_dir), str(run_dir.resolve()), str(tmp_path), str(Path.home())}:
        assert machine not in text


def test_export_for_students_leaves_out_solution_cells(executed, tmp_path, capsys):
    assert main(["export", str(executed), "--student"]) == 0
    student = executed.with_name("ok_metrics.student.html").read_text(encoding="utf-8")
    assert SOLUTION not in student and "PclWeightsPanel" in student
    target = tmp_path / "elsewhere" / "class.html"
    target.parent.mkdir()
    assert main(["export", str(executed), "--student", "-o", str(target)]) == 0
    assert SOLUTION not in target.read_text(encoding="utf-8")
    assert sorted(target.parent.iterdir()) == [target]  # one file
    assert main(["export", str(executed), "-o", str(target)]) == 2
    assert "-o" in _error_line(capsys)


def test_export_assets_folder_loads_plotly_and_mathjax_from_a_folder(executed, run_dir, tmp_path, capsys):
    target = tmp_path / "elsewhere" / "page.html"
    target.parent.mkdir()
    assert main(["export", str(executed), "--assets-folder", "-o", str(target)]) == 0
    assert {"assets/plotly.min.js", "assets/mathjax/tex-svg-full.js"} <= set(_references(target).loaded)
    assert (target.parent / ASSETS_DIR / PLOTLY_JS).is_file()  # the assets go beside a page elsewhere
    page = target.read_text(encoding="utf-8")
    assert "ui/safe" in json.loads(re.search(r"window\.MathJax = (\{.*?\});</script>", page).group(1))["loader"]["load"]
    assert (target.parent / ASSETS_DIR / "mathjax" / "ui" / "safe.js").is_file()
    in_a_run = tmp_path / "run" / "ok_metrics" / "x=2.0" / "ok_metrics.ipynb"  # the runner's layout
    in_a_run.parent.mkdir(parents=True)
    shutil.copyfile(executed, in_a_run)
    assert main(["export", str(in_a_run), "--assets-folder"]) == 0  # beside its notebook: the run folder's assets/
    assert "../../assets/mathjax/tex-svg-full.js" in _references(in_a_run.with_suffix(".html")).loaded
    assert RunAssets(tmp_path / "run" / ASSETS_DIR).mathjax_js.is_file()


@pytest.mark.parametrize(
    ("content", "named"),
    [
        (None, "missing.ipynb"),  # no such file
        (b"not json", "bad.ipynb"),
        (b"\xff\xfe binary", "bad.ipynb"),
        (b"[1, 2]", "bad.ipynb"),
        (b'{"nbformat": 4, "nbformat_minor": 5, "metadata": {}}', "bad.ipynb"),  # no cells
    ],
    ids=["missing", "text", "binary", "json-list", "no-cells"],
)
def test_export_refuses_what_is_not_a_notebook(tmp_path, capsys, content, named):
    path = tmp_path / named
    if content is not None:
        path.write_bytes(content)
    assert main(["export", str(path)]) == 2
    assert re.match(rf"error: NOTEBOOK {re.escape(str(path))}:", _error_line(capsys))
    assert sorted(tmp_path.iterdir()) == ([path] if content is not None else [])  # nothing written


def test_export_refuses_an_output_folder_that_does_not_exist(executed, tmp_path, capsys):
    assert main(["export", str(executed), "-o", str(tmp_path / "no" / "page.html")]) == 2
    assert re.match(r"error: -o .*page\.html:", _error_line(capsys))


def test_python_m_workbench_export_runs(executed):
    completed = subprocess.run(
        [sys.executable, "-m", "workbench", "export", str(executed), "-o", str(executed.with_name("cli.html"))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    assert executed.with_name("cli.html").is_file()
