"""plotly.js and MathJax for offline pages: inlined into a self-contained page (:func:`inline_plotly_js`,
:func:`inline_mathjax_js`), or shared by the pages of a folder under ``<folder>/assets/`` (:func:`ensure_assets`).

A run's ``figures/*.html`` pages load the run's plotly.js by a relative path, so a run folder opens without a
network and holds plotly.js (4.8 MB) once for them; copied out of the folder, such a page says where its figure is
(:func:`link_figures`). Its notebook pages and ``index.html`` are self-contained.
``python -m workbench export --assets-folder`` writes a page that loads both from a folder:

    <folder>/assets/plotly.min.js            plotly.js of the installed plotly package
    <folder>/assets/mathjax/tex-svg-full.js  MathJax 3: TeX input with every extension, SVG output (no
                                             web fonts, which browsers refuse on file:// pages)
    <folder>/assets/mathjax/ui/safe.js       MathJax's safe extension (workbench.runs.export loads it)
    <folder>/assets/mathjax/LICENSE          MathJax's Apache 2.0 licence

MathJax comes from the django-static-mathjax package.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from functools import partial
from importlib.util import find_spec
from pathlib import Path

from workbench.metrics_file import write_atomically

ASSETS_DIR = "assets"
PLOTLY_JS = "plotly.min.js"
MATHJAX_DIR = "mathjax"
MATHJAX_JS = "tex-svg-full.js"
# asset file under assets/mathjax/ -> its path in django-static-mathjax's static/mathjax/
MATHJAX_FILES = {MATHJAX_JS: "es5/tex-svg-full.js", "ui/safe.js": "es5/ui/safe.js", "LICENSE": "LICENSE"}
PRINT_WIDTH = 640  # px: a printed figure's width, within an A4 or Letter page's 12 mm margins at 1:1 (703 and 720 px)
PRINT_CSS = """@media print {
  @page { margin: 12mm; }
  .js-plotly-plot, figure { break-inside: avoid; }
  .modebar-container { display: none; }
}"""
"""What a page needs on paper: a figure is not split across pages, and plotly's toolbar is left out."""
PRINT_FIGURES_JS = f"""<script>
// Printing ("Save as PDF" too) draws each plotly figure {PRINT_WIDTH} px wide, which a page holds; then as it was
window.addEventListener("beforeprint", () => document.querySelectorAll(".js-plotly-plot").forEach((figure) => {{
  figure.dataset.screenWidth = figure.layout.width ?? "";
  Plotly.relayout(figure, {{width: {PRINT_WIDTH}}});
}}));
window.addEventListener("afterprint", () => document.querySelectorAll(".js-plotly-plot").forEach((figure) => {{
  const width = figure.dataset.screenWidth;
  Plotly.relayout(figure, width ? {{width: Number(width)}} : {{width: null, autosize: true}});
}}));
</script>"""
"""The script every page with plotly figures holds: figures sized for the paper while it prints (their screen width
would be cropped), then back as they were."""


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
    """The folder whose ``assets/`` an executed notebook's pages share: the runner writes
    ``<run>/<stem>/[<point>/]<stem>.ipynb``; a notebook outside that layout keeps its assets beside it."""
    notebook = Path(notebook).resolve()
    for folder in (notebook.parent, notebook.parent.parent):
        if folder.name == notebook.stem:
            return folder.parent
    return notebook.parent


def _mathjax_source() -> Path:
    spec = find_spec("mathjax")  # the import name of django-static-mathjax
    root = Path(next(iter(spec.submodule_search_locations)), "static", "mathjax") if spec else None
    missing = [name for name in MATHJAX_FILES.values() if root is None or not (root / name).is_file()]
    if missing:
        raise RuntimeError(f"MathJax is missing {missing}: (re)install the django-static-mathjax package")
    return root


def _write_once(target: Path, write) -> None:
    """Create ``target`` unless it exists, through a temporary file and a rename (no page sees half a file); a write
    that fails (a full disk) leaves no temporary file and is a ValueError naming ``target`` and the reason."""
    if target.is_file():
        return
    staging = target.with_name(f".{target.name}.partial")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        write(staging)
        staging.replace(target)
    except OSError as error:
        staging.unlink(missing_ok=True)
        raise ValueError(f"{target}: cannot be written ({error.strerror or error})") from None


def ensure_assets(run_dir: str | Path, mathjax: bool = True) -> RunAssets:
    """Copy plotly.js and (``mathjax``) MathJax into ``<run_dir>/assets/`` unless they are there; return their paths."""
    from plotly.offline import get_plotlyjs

    assets = RunAssets(Path(run_dir) / ASSETS_DIR)
    _write_once(assets.plotly_js, lambda path: path.write_text(get_plotlyjs(), encoding="utf-8"))
    for name, source in MATHJAX_FILES.items() if mathjax else ():
        target = assets.root / MATHJAX_DIR / name
        if not target.is_file():
            _write_once(target, partial(shutil.copyfile, _mathjax_source() / source))
    return assets


def inline_plotly_js() -> str:
    """plotly.js of the installed plotly package, for a ``<script>`` element of a self-contained page."""
    from plotly.offline import get_plotlyjs

    return _script_text(get_plotlyjs())


def inline_mathjax_js() -> str:
    """MathJax's ``tex-svg-full.js`` and its safe extension as one script, for a ``<script>`` element of a
    self-contained page. The extension must run in the same script: MathJax starts (and builds its document
    handler) as soon as the script that loaded it ends; its configuration then lists nothing to load."""
    source = _mathjax_source()
    parts = [(source / MATHJAX_FILES[name]).read_text(encoding="utf-8") for name in (MATHJAX_JS, "ui/safe.js")]
    return _script_text("\n;\n".join(parts))


def _script_text(code: str) -> str:
    """``code`` safe inside ``<script>...</script>``: a ``</script`` can only occur in a string, regular expression or
    comment, where ``<\\/script`` means the same."""
    return re.sub(r"</(script)", r"<\\/\1", code, flags=re.IGNORECASE)


# A page saved by plotly's write_html(include_plotlyjs="directory") loads the copy beside it.
_LOCAL_PLOTLY_JS = re.compile(r'(<script\b[^>]*\bsrc=")' + re.escape(PLOTLY_JS) + r'("[^>]*>\s*</script>)')


# Right after the shared plotly.js's script element of a figure page: a page copied out of its run folder finds no
# plotly.js, and says so instead of staying blank.
PLOTLY_MISSING_CLASS = "workbench-plotly-missing"
_PLOTLY_MISSING = (
    '<script>if (!window.Plotly) {{ document.currentScript.insertAdjacentHTML("afterend", '
    '"<p class=\\"{css_class}\\">This figure needs {shared}, the plotly.js of its run folder, and draws only inside '
    "that folder. The notebook's page, one folder up, holds every figure of the notebook and opens alone.</p>\"); }}"
    "</script>"
)


def link_figures(figures_dir: str | Path, assets: RunAssets) -> list[Path]:
    """Point every page in ``figures_dir`` that loads the ``plotly.min.js`` beside it (workbench.viz.figures.save
    writes standalone pages) at the run's shared copy and delete the local copy; returns the pages changed. A linked
    page copied out of the run folder shows a line saying where its figure is instead of a blank page."""
    figures_dir = Path(figures_dir)
    shared = assets.relative_to(figures_dir, assets.plotly_js)
    missing = _PLOTLY_MISSING.format(css_class=PLOTLY_MISSING_CLASS, shared=shared)
    changed = []
    for page in sorted(figures_dir.glob("*.html")):
        text = page.read_text(encoding="utf-8")
        linked = _LOCAL_PLOTLY_JS.sub(lambda match: f"{match.group(1)}{shared}{match.group(2)}{missing}", text)
        if linked != text:
            write_atomically(page, linked)
            changed.append(page)
    (figures_dir / PLOTLY_JS).unlink(missing_ok=True)  # no page loads it any more
    return changed
