"""Offline HTML exports: one plotly.js and one MathJax per run folder, shared by relative paths;
no remote script, stylesheet or font; equations and figures rendered in headless Chromium
(skipped where no Chromium is installed)."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import nbformat
import plotly.graph_objects as go
import pytest
from nbformat.v4 import new_markdown_cell
from plotly.offline import get_plotlyjs

from workbench.runs import run
from workbench.runs.assets import ASSETS_DIR, PLOTLY_JS, RunAssets, ensure_assets, link_figures, run_dir_of
from workbench.runs.execute import export_html
from workbench.viz import figures

FIXTURE = Path(__file__).parent / "fixtures" / "notebooks" / "ok_metrics.ipynb"
# Equations as notebooks 02-04 write them: \tag, cases, \operatorname, \mathbb, \text, \frac, sums.
EQUATIONS = r"""## Equations as the notebooks write them

Label smoothing $\mathrm{LS}_i = -\sum_k q_k \log p_{ik}$ with $z \in \mathbb{R}^{K+n}$ and $\operatorname{round}(p\,n)$,

$$\mathrm{PCL}^{+} = \frac{n_0}{n_1 + n_2}\ \text{(eq. 2)}\quad\text{or}\quad \frac{n_1+n_2}{n_0}\ \text{(code)}, \qquad \mathrm{PCL}^{-} = \frac{n_0 + n_2}{n_1} \tag{2, 3}$$

$$\mathcal{L}_i = \begin{cases}\mathrm{LS}_i + \mathrm{PCL}^{+} & \text{far mistake}\\ \mathrm{LS}_i - \mathrm{PCL}^{-} & \text{near mistake}\\ \mathrm{LS}_i & \text{correct}\end{cases} \tag{4}$$

$$\mathcal{L}_{\text{SR}} = \mathcal{L}_{\text{MLM}} + \lambda\,\frac{1}{|\mathcal{M}|}\sum_{i\in\mathcal{M}} \bigl(1 - \cos(e(y_i), e(r_i))\bigr). \tag{3}$$
"""
INLINE_EQUATIONS, DISPLAY_EQUATIONS = 3, 3
CHROMIUM = next((shutil.which(name) for name in ("chromium", "chromium-browser", "google-chrome") if shutil.which(name)), None)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A real run of the fixture notebook with a markdown cell of equations, at one sweep point
    (so pages sit two and three folders below the run folder)."""
    root = tmp_path_factory.mktemp("exports")
    notebook = nbformat.read(FIXTURE, as_version=4)
    notebook.cells.insert(1, new_markdown_cell(EQUATIONS, id="ok-equations"))
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
    parser = _References()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


# ----------------------------------------------------------------------------- the run folder


def test_run_folder_holds_one_plotly_js_and_one_mathjax(run_dir):
    assets = RunAssets(run_dir / ASSETS_DIR)
    assert sorted(run_dir.rglob(PLOTLY_JS)) == [assets.plotly_js]  # not one per figures/ folder
    assert assets.plotly_js.read_text(encoding="utf-8") == get_plotlyjs()
    assert assets.mathjax_js.stat().st_size > 1_000_000  # the whole TeX-to-SVG MathJax, in one file
    assert "Apache License" in (assets.mathjax_js.parent / "LICENSE").read_text(encoding="utf-8")


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


def test_export_and_figure_pages_use_the_shared_copies(run_dir):
    export, figure, _ = _pages(run_dir)
    export_loads = _references(export).loaded
    assert "../../assets/plotly.min.js" in export_loads
    assert "../../assets/mathjax/tex-svg-full.js" in export_loads
    assert _references(figure).loaded == ["../../../assets/plotly.min.js"]


def test_executed_notebook_and_export_stay_small(run_dir):
    # before the shared assets each carried plotly.js: 4.8 MB (.ipynb) and 4.9 MB (.html)
    cell = _cell(run_dir)
    notebook = nbformat.read(cell / "ok_metrics.ipynb", as_version=4)
    outputs = [output for c in notebook.cells for output in c.get("outputs", []) if "data" in output]
    plotly_outputs = [output for output in outputs if "application/vnd.plotly.v1+json" in output.data]
    assert len(plotly_outputs) == 1  # JupyterLab draws this one with its plotly extension
    html = plotly_outputs[0].data["text/html"]
    assert "Plotly.newPlot" in html and "<script src" not in html and "http" not in html
    assert (cell / "ok_metrics.ipynb").stat().st_size < 100_000
    assert (cell / "ok_metrics.html").stat().st_size < 1_000_000


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


def test_export_html_outside_a_run_keeps_its_assets_beside_it(run_dir, tmp_path):
    notebook = tmp_path / "exported.ipynb"
    shutil.copyfile(_cell(run_dir) / "ok_metrics.ipynb", notebook)
    target = export_html(notebook)
    assert target == tmp_path / "exported.html"
    assert {"assets/plotly.min.js", "assets/mathjax/tex-svg-full.js"} <= set(_references(target).loaded)
    assert (tmp_path / "assets" / PLOTLY_JS).is_file()
    elsewhere = export_html(notebook, run_dir=tmp_path / "shared")
    assert "shared/assets/plotly.min.js" in _references(elsewhere).loaded


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


def _rendered_dom(page: Path) -> str:
    """The page's DOM after its scripts ran, in headless Chromium with every http(s) request
    sent to a closed local port, i.e. without a network."""
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
                f"--user-data-dir={profile}",
                "--proxy-server=http://127.0.0.1:9",
                "--proxy-bypass-list=<-loopback>",
                "--virtual-time-budget=30000",
                "--dump-dom",
                page.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert completed.returncode == 0, completed.stderr[-2000:]
    return completed.stdout


@pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (Debian: apt-get install chromium)")
def test_export_renders_equations_and_figure_offline_in_chromium(run_dir):
    dom = _rendered_dom(_pages(run_dir)[0])
    containers = re.findall(r"<mjx-container\b[^>]*>", dom)
    assert len(containers) == INLINE_EQUATIONS + DISPLAY_EQUATIONS
    assert sum('display="true"' in tag for tag in containers) == DISPLAY_EQUATIONS
    assert 'jax="SVG"' in containers[0]
    assert not re.search(r'<[^>]*data-mml-node="merror"', dom)  # no MathJax error box (bad syntax)
    assert not re.search(r'<[^>]*data-mml-node="mtext"[^>]*fill="red"', dom)  # no undefined macro (drawn red)
    visible = _VisibleText()
    visible.feed(dom)
    text = "".join(visible.parts)
    assert "Equations as the notebooks write them" in text
    for raw in ("$$", "\\frac", "\\begin{cases}", "\\tag", "\\mathrm"):
        assert raw not in text, f"raw LaTeX {raw!r} left in the visible text"
    assert len(re.findall(r'class="main-svg"', dom)) >= 2  # plotly drew the figure output


@pytest.mark.skipif(CHROMIUM is None, reason="needs Chromium (Debian: apt-get install chromium)")
def test_figure_page_renders_offline_in_chromium(run_dir):
    dom = _rendered_dom(_pages(run_dir)[1])
    assert len(re.findall(r'class="main-svg"', dom)) >= 2
