"""The offline assets a run folder shares (one plotly.js, one MathJax, under ``<run>/assets/``)
and the nbconvert HTML exporter whose pages use them.

Every page of a run (the notebooks' HTML exports, the figure files under each
``figures/``, the iframes of ``index.html``) references these copies by a
relative path, so a run folder opens without a network and holds plotly.js
(about 4.7 MB) once instead of three times per notebook.

    <run>/assets/plotly.min.js           plotly.js of the installed plotly package
    <run>/assets/mathjax/tex-svg-full.js MathJax 3 (TeX input, SVG output, every TeX
                                         extension), from the django-static-mathjax package
    <run>/assets/mathjax/LICENSE         MathJax's Apache 2.0 licence

MathJax's SVG output needs no web fonts (browsers refuse fonts from ``file://``
pages) and the ``-full`` build loads nothing later, so one 2.3 MB file renders
every equation of the notebooks (\\tag, cases, \\operatorname, \\mathbb, ...).
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

ASSETS_DIR = "assets"
PLOTLY_JS = "plotly.min.js"
MATHJAX_DIR = "mathjax"
MATHJAX_JS = "tex-svg-full.js"
_MATHJAX_PACKAGE = "mathjax"  # the import name of django-static-mathjax
_MATHJAX_PACKAGE_ROOT = Path("static", "mathjax")


@dataclass(frozen=True)
class RunAssets:
    """Where a run folder's shared assets are on disk."""

    root: Path

    @property
    def plotly_js(self) -> Path:
        return self.root / PLOTLY_JS

    @property
    def mathjax_js(self) -> Path:
        return self.root / MATHJAX_DIR / MATHJAX_JS

    def relative_to(self, page_dir: str | Path, asset: Path) -> str:
        """The URL of ``asset`` as written in a page inside ``page_dir`` (POSIX separators)."""
        return Path(os.path.relpath(asset, Path(page_dir))).as_posix()


def run_dir_of(notebook: str | Path) -> Path:
    """The folder whose ``assets/`` an executed notebook's pages share.

    The runner writes ``<run>/<stem>/[<point>/]<stem>.ipynb`` (see workbench.runs), so
    the run folder is the parent of the nearest folder named after the notebook. A
    notebook outside that layout (papermill by hand, a test) keeps its assets beside it.
    """
    notebook = Path(notebook).resolve()
    for folder in (notebook.parent, notebook.parent.parent):
        if folder.name == notebook.stem:
            return folder.parent
    return notebook.parent


def _mathjax_source() -> Path:
    spec = find_spec(_MATHJAX_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("MathJax is missing: install the django-static-mathjax package (a workbench dependency)")
    root = Path(next(iter(spec.submodule_search_locations))) / _MATHJAX_PACKAGE_ROOT
    if not (root / "es5" / MATHJAX_JS).is_file():
        raise RuntimeError(f"MathJax is incomplete: {root / 'es5' / MATHJAX_JS} not found (reinstall django-static-mathjax)")
    return root


def _write_once(target: Path, write) -> None:
    """Create ``target`` through a temporary file and a rename, so a page never sees half a file."""
    if target.is_file():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(f".{target.name}.partial")
    write(staging)
    staging.replace(target)


def ensure_assets(run_dir: str | Path) -> RunAssets:
    """Copy plotly.js and MathJax into ``<run_dir>/assets/`` unless they are there; return their paths."""
    from plotly.offline import get_plotlyjs

    assets = RunAssets(Path(run_dir) / ASSETS_DIR)
    _write_once(assets.plotly_js, lambda path: path.write_text(get_plotlyjs(), encoding="utf-8"))
    if not assets.mathjax_js.is_file():
        source = _mathjax_source()
        _write_once(assets.mathjax_js.with_name("LICENSE"), lambda path: shutil.copyfile(source / "LICENSE", path))
        _write_once(assets.mathjax_js, lambda path: shutil.copyfile(source / "es5" / MATHJAX_JS, path))
    return assets


# A page saved by plotly's write_html(include_plotlyjs="directory") loads the copy beside it.
_LOCAL_PLOTLY_JS = re.compile(r'(<script\b[^>]*\bsrc=")' + re.escape(PLOTLY_JS) + '"')


def link_figures(figures_dir: str | Path, assets: RunAssets) -> list[Path]:
    """Point every page in ``figures_dir`` that loads the ``plotly.min.js`` beside it at the
    run's shared copy, then delete the local copy; returns the pages changed.

    ``workbench.viz.figures.save`` writes standalone pages (right for a notebook run by
    hand); the runner calls this after the notebook so the run folder keeps one plotly.js.
    """
    figures_dir = Path(figures_dir)
    shared = assets.relative_to(figures_dir, assets.plotly_js)
    changed = []
    for page in sorted(figures_dir.glob("*.html")):
        text = page.read_text(encoding="utf-8")
        linked = _LOCAL_PLOTLY_JS.sub(lambda match: f'{match.group(1)}{shared}"', text)
        if linked != text:
            page.write_text(linked, encoding="utf-8")
            changed.append(page)
    (figures_dir / PLOTLY_JS).unlink(missing_ok=True)  # no page loads it any more
    return changed


# The lab template with every CDN reference replaced: plotly.js and MathJax come from the
# run's assets (paths in resources["workbench_assets"]); require.js is not needed (figure
# outputs call the global Plotly); the widget manager (from unpkg) and mermaid are left out,
# so a widget output (e.g. a tqdm bar) shows nothing instead of fetching a script.
OFFLINE_TEMPLATE = "workbench_offline.html.j2"
_OFFLINE_TEMPLATE_SOURCE = r"""{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}
<script>window.PlotlyConfig = {MathJaxConfig: 'local'};</script>
<script charset="utf-8" src="{{ resources.workbench_assets.plotly_js }}"></script>
{%- endblock html_head_js_requirejs -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
{%- block html_head_js_mathjax -%}
<script>
window.MathJax = {
  tex: {
    inlineMath: [['$', '$'], ['\\(', '\\)']],
    displayMath: [['$$', '$$'], ['\\[', '\\]']],
    processEscapes: true,
    processEnvironments: true,
    tags: 'ams'
  },
  svg: {fontCache: 'global'},
  options: {ignoreHtmlClass: 'tex2jax_ignore', processHtmlClass: 'tex2jax_process'}
};
</script>
<script id="MathJax-script" src="{{ resources.workbench_assets.mathjax_js }}"></script>
{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
"""


def export_offline_html(notebook: str | Path, target: str | Path, assets: RunAssets) -> Path:
    """Write the lab-style HTML export of ``notebook`` to ``target``, loading plotly.js and
    MathJax from ``assets`` by relative paths (no http(s) reference to a script, style or font)."""
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    target = Path(target)
    exporter = HTMLExporter(
        template_name="lab",
        template_file=OFFLINE_TEMPLATE,
        extra_loaders=[DictLoader({OFFLINE_TEMPLATE: _OFFLINE_TEMPLATE_SOURCE})],
    )
    resources = {
        "workbench_assets": {
            "plotly_js": assets.relative_to(target.parent, assets.plotly_js),
            "mathjax_js": assets.relative_to(target.parent, assets.mathjax_js),
        }
    }
    body, _ = exporter.from_filename(str(notebook), resources=resources)
    target.write_text(body, encoding="utf-8")
    return target
