"""The offline HTML page of an executed notebook, as the runner writes it and as
``python -m workbench export NOTEBOOK.ipynb [--student] [--trusted] [--assets-folder] [-o OUT.html]`` writes it.

The page is nbconvert's ``lab`` template with its CDN blocks replaced. By default it is self-contained:
plotly.js and MathJax (one component build, ``tex-svg-full.js``, with its safe extension) are inlined, each only
when the page has a figure or a formula, so the page opens offline when copied anywhere. With ``assets`` it
loads them from a folder's ``assets/`` (workbench.runs.assets) by relative paths instead. require.js, the widget
manager and mermaid are left out: a widget's output shows nothing (a tqdm bar's text would be its state when it
was drawn, ``0%| 0/500``), a live slider panel its page figure. MathJax runs with its ``safe`` extension and without
``\\require``: TeX in text a page shows (a parameter, a table row) makes no link (``$\\href{javascript:alert(1)}{X}$``
draws X), class, id, style or script.

Unless ``trusted``, the notebook's HTML and markdown are sanitised (workbench.runs.sanitize): a notebook the
workbench did not write runs no script of its own in the page and makes it ask no server for anything; its plotly
figures are drawn from their data. The page also shows papermill's injected parameters as written
(``"美丽"``, not ``"\\u7f8e\\u4e3d"``) and never breaks a line of output text inside a number.
"""

from __future__ import annotations

import io
import json
import os
import re
import secrets
import tokenize
from pathlib import Path
from typing import Any

from workbench.runs.assets import (
    ASSETS_DIR,
    PRINT_CSS,
    PRINT_FIGURES_JS,
    RunAssets,
    ensure_assets,
    inline_mathjax_js,
    inline_plotly_js,
    link_figures,
    run_dir_of,
)
from workbench.runs.notebook_cells import INJECTED_PARAMETERS_TAG, read_notebook
from workbench.runs.sanitize import PLOTLY_MIME, clean_html, figure_from_html, figure_html

SOLUTION_TAGS = ("solution", "solutions", "answer", "answers")  # cells left out of a --student page, in any case
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
LIVE_PANEL_NOTE = (
    "*The sliders above start where the cell's parameters set them when it ran, not where they were left in "
    "JupyterLab: to start them elsewhere, set the parameter (e.g. `epsilon = 0.3`) and run the cell again before "
    "saving.*"
)
"""Shown below a live slider panel's page figure: the page draws the figure the cell displayed, at its start."""
# nbconvert's HTML priority less widgets, JavaScript and mermaid (none of them runs in the page); figures first
TRUSTED_PRIORITY = [PLOTLY_MIME, "application/javascript", "text/html", "text/markdown", "image/svg+xml"]
SANITISED_PRIORITY = [PLOTLY_MIME, "text/html", "text/markdown", "image/svg+xml"]
_STATIC_PRIORITY = ["text/latex", "image/png", "image/jpeg", "text/plain"]
MATH_DELIMITERS = ("$", "\\(", "\\[", "\\begin{")  # what MathJax's TeX input looks for (MATHJAX_CONFIG)
MATHJAX_CONFIG = {
    "loader": {"load": ["ui/safe"]},
    "tex": {
        "inlineMath": [["$", "$"], ["\\(", "\\)"]],
        "displayMath": [["$$", "$$"], ["\\[", "\\]"]],
        "processEscapes": True,
        "processEnvironments": True,
        "tags": "ams",
        "packages": {"[-]": ["require"]},  # \require would load further extensions
    },
    "svg": {"fontCache": "global"},
    "options": {
        "ignoreHtmlClass": "tex2jax_ignore",
        "processHtmlClass": "tex2jax_process",
        # no URL at all: the safe extension's own check lets "java<tab>script:" pass as a relative URL
        "safeOptions": {"allow": {"URLs": "none", "classes": "safe", "cssIDs": "safe", "styles": "safe"}},
    },
}
# Output text (a printed result line) wraps at spaces, never inside a number; JupyterLab's CSS breaks anywhere. On
# paper (a class handout) code and output lines wrap whole within the page, without the In/Out prompts' column.
PAGE_CSS = (
    ".jp-OutputArea-output pre { word-break: normal; overflow-wrap: break-word; }\n"
    + PRINT_CSS
    + """
@media print {
  .jp-InputPrompt, .jp-OutputPrompt { display: none; }
  .jp-InputArea-editor, .jp-OutputArea-output, .jp-RenderedText { overflow: visible !important; }
  pre { white-space: pre-wrap !important; overflow-wrap: anywhere; }
}"""
)
OFFLINE_TEMPLATE = "workbench_offline.html.j2"
_OFFLINE_TEMPLATE_SOURCE = r"""{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}
{{ resources.workbench_page.plotly }}
{%- endblock html_head_js_requirejs -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
{%- block html_head_js_mathjax -%}
{{ resources.workbench_page.mathjax }}
{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block html_head_css -%}
<style>{{ resources.workbench_page.css }}</style>
{%- endblock html_head_css -%}
{% block data_other scoped -%}
{#- the loop's mimetype is not in this block's scope; the figure comes first in the priority -#}
{%- if 'application/vnd.plotly.v1+json' in output.data -%}
<div class="jp-RenderedHTMLCommon jp-RenderedHTML jp-OutputArea-output {{ extra_class }}" data-mime-type="text/html">
{{ output.data['application/vnd.plotly.v1+json'] | workbench_figure }}
</div>
{%- endif -%}
{%- endblock data_other %}
"""


class _Figures:
    """The template's ``workbench_figure`` filter; counts the figures it draws (the page then needs plotly.js)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, bundle: Any) -> str:
        self.count += 1
        return figure_html(bundle)


def is_solution(cell: Any) -> bool:
    """Whether ``cell`` is tagged as a solution (``SOLUTION_TAGS``, in any case)."""
    tags = cell.get("metadata", {}).get("tags", [])
    return any(isinstance(tag, str) and tag.strip().lower() in SOLUTION_TAGS for tag in tags)


def readable_parameters(source: str) -> str:
    """Python source with each plain string literal written as ``repr`` writes it: papermill escapes every
    character beyond ASCII (``"\\u7f8e\\u4e3d"``), ``repr`` keeps printable ones (``"美丽"``); the values are equal.
    Source that does not tokenize is returned unchanged."""
    import ast

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError):
        return source
    lines = source.splitlines(keepends=True)
    for token in reversed([token for token in tokens if token.type == tokenize.STRING]):
        (row, start), (end_row, end) = token.start, token.end
        try:
            value = ast.literal_eval(token.string)
        except (ValueError, SyntaxError):  # an f-string
            continue
        if row != end_row or not isinstance(value, str):
            continue
        lines[row - 1] = lines[row - 1][:start] + readable_literal(value) + lines[row - 1][end:]
    return "".join(lines)


def readable_literal(value: str) -> str:
    """``value`` as a Python string literal written as ``repr`` writes it (printable characters as they are,
    ``"美丽"``), in double quotes (papermill's) when the value holds no quote."""
    text = repr(value)
    if text.startswith("'") and "'" not in value and '"' not in value:
        text = f'"{text[1:-1]}"'
    return text


def machine_paths(notebook: Path) -> list[tuple[str, str]]:
    """(this machine's path, what a page shows instead), longest first: the run folder of ``notebook``
    (``run_dir_of``; its own folder outside a run) becomes relative (``/home/t/outputs/run/05_x`` -> ``05_x``, the
    folder itself ``.``), the data root ``$WORKBENCH_DATA``, the home folder ``~``."""
    from workbench.data_root import DATA_ROOT_ENV, data_root

    run_dir = run_dir_of(notebook)
    places = {str(path): "." for path in (run_dir, run_dir.absolute(), run_dir.resolve())}
    places.update({str(path): f"${DATA_ROOT_ENV}" for path in (data_root(), data_root().resolve())})
    places.update({str(path): "~" for path in (Path.home(), Path.home().resolve())})
    return sorted(((path, shown) for path, shown in places.items() if path != "/"), key=lambda item: -len(item[0]))


def relative_paths(text: str, places: list[tuple[str, str]]) -> str:
    """``text`` with each path of :func:`machine_paths` written as the page shows it (a path under the run folder
    relative to it); a longer name that merely starts alike (``/home/tim`` for ``/home/t``) is left alone."""
    for path, shown in places:

        def replace(match: re.Match, shown: str = shown) -> str:
            if shown == ".":  # the run folder: a path under it is relative to it
                return "" if match.group(1) else "."
            return shown + (match.group(1) or "")

        text = re.sub(re.escape(path) + r"(?![\w.-])(/)?", replace, text)
    return text


def _relative_output(output: Any, places: list[tuple[str, str]]) -> None:
    """The text of ``output`` (a stream, an error, its text/* data) with :func:`relative_paths`, in place."""
    if output.get("output_type") == "stream":
        output["text"] = relative_paths(output.get("text", ""), places)
    elif output.get("output_type") == "error":
        output["evalue"] = relative_paths(output.get("evalue", ""), places)
        output["traceback"] = [relative_paths(line, places) for line in output.get("traceback", [])]
    for mime, value in output.get("data", {}).items():
        if mime.startswith("text/") and isinstance(value, str):
            output["data"][mime] = relative_paths(value, places)


def _prepare(nb: Any, notebook: Path, student: bool, trusted: bool, priority: list[str]) -> Any:
    """The notebook as its page shows it: solutions out (``student``), dead widgets out, figures of the live panels
    as data (unless ``trusted``), outputs the page cannot show out (nothing in ``priority``: JavaScript in a
    sanitised page), the injected parameters readable, a note below each live panel's figure
    (:data:`LIVE_PANEL_NOTE`), no path of this machine (:func:`machine_paths`: paths under the run folder relative to
    it). ValueError naming the notebook when ``student`` finds no solution cell."""
    from nbformat.v4 import new_output

    if student:
        kept = [cell for cell in nb.cells if not is_solution(cell)]
        if len(kept) == len(nb.cells):
            tags = ", ".join(SOLUTION_TAGS)
            raise ValueError(
                f"NOTEBOOK {notebook}: --student: no cell is tagged {tags} (in any case), so the page would show "
                "every cell; tag the solution cells, or export without --student"
            )
        nb.cells = kept
    nb.metadata.pop("widgets", None)  # the saved widget state (MBs for a plotly FigureWidget) is dead offline
    places = machine_paths(notebook)
    for cell in nb.cells:
        if INJECTED_PARAMETERS_TAG in cell.get("metadata", {}).get("tags", []):
            cell.source = readable_parameters(cell.source)
        cell.source = relative_paths(cell.source, places)
        for output in cell.get("outputs", []):
            _relative_output(output, places)
        outputs = []
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            live = WIDGET_VIEW in data
            if live:
                del data[WIDGET_VIEW]
                if "text/html" not in data and PLOTLY_MIME not in data:
                    continue  # a widget's text (a tqdm bar when it was drawn: 0%| 0/500) is not what it showed
            if not trusted:
                output.pop("svg_filename", None)  # file names the template would load an image from
                output.get("metadata", {}).pop("filenames", None)
            if not trusted and "text/html" in data and PLOTLY_MIME not in data:
                figure = figure_from_html(data["text/html"])  # a live panel's page figure
                if figure is not None:
                    data[PLOTLY_MIME] = figure
            if "data" in output and not any(mime in data for mime in priority):
                continue
            outputs.append(output)
            if live:  # a slider panel's page figure: it starts where the cell began, which the page says
                outputs.append(new_output("display_data", data={"text/markdown": LIVE_PANEL_NOTE}))
        if "outputs" in cell:
            cell.outputs = outputs
    return nb


def _attachment_error(nb: Any, notebook: Path, message: str) -> ValueError:
    """The one error for nbconvert's ``missing attachment: NAME``: the notebook, the cell and the attachment."""
    name = message.split(":", 1)[-1].strip()
    cells = [index for index, cell in enumerate(nb.cells) if f"attachment:{name}" in cell.get("source", "")]
    where = f"markdown cell {cells[0]}" if cells else "a markdown cell"
    return ValueError(f"NOTEBOOK {notebook}: {where} shows attachment:{name}, which the notebook does not hold")


def render_page(
    notebook: str | Path,
    page_dir: str | Path,
    assets: RunAssets | None = None,
    student: bool = False,
    trusted: bool = False,
) -> tuple[str, dict[str, bool]]:
    """The page of ``notebook`` for a file in ``page_dir`` and what it needs (``{"plotly": ..., "mathjax": ...}``):
    self-contained, or (``assets``) loading plotly.js and MathJax from there. Writes nothing.
    ValueError naming the notebook for an unreadable notebook, a missing attachment or ``student`` without solutions."""
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter
    from nbconvert.filters.markdown_mistune import InvalidNotebook
    from traitlets.config import Config

    notebook = Path(notebook)
    priority = (TRUSTED_PRIORITY if trusted else SANITISED_PRIORITY) + _STATIC_PRIORITY
    nb = _prepare(read_notebook(notebook), notebook, student, trusted, priority)
    exporter = HTMLExporter(
        template_name="lab",
        template_file=OFFLINE_TEMPLATE,
        extra_loaders=[DictLoader({OFFLINE_TEMPLATE: _OFFLINE_TEMPLATE_SOURCE})],
        sanitize_html=not trusted,
        config=Config(NbConvertBase={"display_data_priority": priority}, CoalesceStreamsPreprocessor={"enabled": True}),
    )
    figures = _Figures()
    exporter.register_filter("workbench_figure", figures)
    exporter.register_filter("clean_html", clean_html)
    markers = {name: f"<!-- workbench {name} {secrets.token_hex(8)} -->" for name in ("plotly", "mathjax")}
    resources = {
        "metadata": {"name": notebook.stem, "path": str(notebook.parent)},
        "workbench_page": {**markers, "css": PAGE_CSS},
    }
    try:
        page, _ = exporter.from_notebook_node(nb, resources=resources)
    except InvalidNotebook as error:
        raise _attachment_error(nb, notebook, str(error)) from None
    shown = page[page.find("<main>") :]  # the notebook, not the template's head
    needs = {
        "plotly": figures.count > 0 or (trusted and "Plotly" in shown),
        "mathjax": any(delimiter in shown for delimiter in MATH_DELIMITERS),
    }
    scripts = _scripts(needs, assets, Path(page_dir))
    for name, marker in markers.items():
        page = page.replace(marker, scripts[name], 1)  # the head's marker comes first
    return page, needs


def _scripts(needs: dict[str, bool], assets: RunAssets | None, page_dir: Path) -> dict[str, str]:
    """The head's plotly.js and MathJax elements: inlined, from ``assets``, or nothing where the page needs none."""
    config = json.loads(json.dumps(MATHJAX_CONFIG))
    if assets is None:
        config["loader"]["load"] = []  # the safe extension is inlined with MathJax
        plotly = f"<script>{inline_plotly_js()}</script>"
        mathjax = f"<script>{inline_mathjax_js()}</script>"
    else:
        plotly = f'<script charset="utf-8" src="{assets.relative_to(page_dir, assets.plotly_js)}"></script>'
        mathjax = f'<script id="MathJax-script" src="{assets.relative_to(page_dir, assets.mathjax_js)}"></script>'
    plotly_config = "<script>window.PlotlyConfig = {MathJaxConfig: 'local'};</script>"
    return {
        "plotly": plotly_config + plotly + PRINT_FIGURES_JS if needs["plotly"] else "",
        "mathjax": f"<script>window.MathJax = {json.dumps(config)};</script>{mathjax}" if needs["mathjax"] else "",
    }


def _write(target: Path, page: str) -> None:
    """Write ``page`` to ``target`` through a temporary file and a rename: no half-written page stays behind
    (a full disk, an interrupt), so a retry finds no page in its way. ValueError naming ``target`` when it fails."""
    staging = target.with_name(f".{target.name}.partial")
    try:
        staging.write_text(page, encoding="utf-8")
        os.replace(staging, target)
    except OSError as error:
        raise ValueError(f"{target}: cannot write the page ({error.strerror or error})") from None
    finally:
        staging.unlink(missing_ok=True)


def export_offline_html(
    notebook: str | Path,
    target: str | Path,
    assets: RunAssets | None = None,
    student: bool = False,
    trusted: bool = False,
) -> Path:
    """Write the page of ``notebook`` to ``target``: self-contained, or (``assets``) loading plotly.js and MathJax
    from there, copied into it first. No http(s) reference to a script, style or font."""
    target = Path(target)
    page, needs = render_page(notebook, target.parent, assets, student, trusted)
    if assets is not None and any(needs.values()):
        ensure_assets(assets.root.parent, mathjax=needs["mathjax"])
    _write(target, page)
    return target


def export_html(notebook: Path, run_dir: Path | None = None) -> Path:
    """The runner's page: a self-contained ``<notebook>.html`` beside the executed notebook. Its ``figures/`` pages
    are pointed at the plotly.js of ``run_dir`` (default: the run folder of the runner's layout, ``run_dir_of``)."""
    shared = ensure_assets(run_dir_of(notebook) if run_dir is None else run_dir, mathjax=False)
    figures_dir = notebook.parent / "figures"
    if figures_dir.is_dir():
        link_figures(figures_dir, shared)
    return export_offline_html(notebook, notebook.with_suffix(".html"))


def export_notebook(
    notebook: str | Path,
    target: str | Path | None = None,
    student: bool = False,
    trusted: bool = False,
    assets_folder: bool = False,
    force: bool = False,
) -> Path:
    """``python -m workbench export``: the page of an executed notebook at ``target`` (default: beside it,
    ``<stem>.html``, or ``<stem>.student.html`` with ``student``), over an existing file only with ``force`` (which
    replaces it whole, once the new page is written). ``student`` leaves out the cells tagged as solutions;
    ``trusted`` keeps the notebook's own scripts.

    Self-contained by default; with ``assets_folder`` the page loads plotly.js and MathJax from the run folder's
    ``assets/`` when the page is beside its notebook (``run_dir_of``), else from an ``assets/`` beside the page.
    ValueError naming the path for a missing or unreadable notebook or an existing target; nothing is written then."""
    notebook = Path(notebook)
    read_notebook(notebook)
    default = notebook.with_name(f"{notebook.stem}.student.html" if student else f"{notebook.stem}.html")
    target = Path(target) if target is not None else default
    option = "-o" if target != default else "the default output"
    if target.exists() and not (force and target.is_file()):
        what = "is not a file" if force else "exists; nothing is overwritten (--force replaces it, -o writes elsewhere)"
        raise ValueError(f"{option} {target}: {what}")
    if not target.parent.is_dir():
        raise ValueError(f"{option} {target}: folder {target.parent} does not exist")
    assets = None
    if assets_folder:
        beside = target.parent.resolve() == notebook.parent.resolve()
        assets = RunAssets((run_dir_of(notebook) if beside else target.parent) / ASSETS_DIR)
    return export_offline_html(notebook, target, assets, student, trusted)
