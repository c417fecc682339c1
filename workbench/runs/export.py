"""The offline HTML page of an executed notebook, as the runner writes it and as
``python -m workbench export NOTEBOOK.ipynb [--student] [-o OUT.html]`` writes it for any notebook.

The page is nbconvert's ``lab`` template with its CDN blocks replaced: plotly.js and MathJax come
from a run folder's ``assets/`` (workbench.runs.assets) by relative paths; require.js, the widget
manager and mermaid are left out (a tqdm bar shows nothing, a live slider panel its page figure). MathJax runs
with its ``safe`` extension and without ``\\require``: TeX in text a page shows (a parameter, a table
row) makes no link (``$\\href{javascript:alert(1)}{X}$`` draws X), class, id, style or script.
"""

from __future__ import annotations

import json
from pathlib import Path

from workbench.records import write_atomically
from workbench.runs.assets import RunAssets, ensure_assets, link_figures, run_dir_of

SOLUTION_TAG = "solution"  # cells left out of a --student page
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
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
OFFLINE_TEMPLATE = "workbench_offline.html.j2"
_OFFLINE_TEMPLATE_SOURCE = r"""{%- extends 'index.html.j2' -%}
{%- block html_head_js_requirejs -%}
<script>window.PlotlyConfig = {MathJaxConfig: 'local'};</script>
<script charset="utf-8" src="{{ resources.workbench_assets.plotly_js }}"></script>
{%- endblock html_head_js_requirejs -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
{%- block html_head_js_mathjax -%}
<script>window.MathJax = {{ resources.workbench_assets.mathjax_config }};</script>
<script id="MathJax-script" src="{{ resources.workbench_assets.mathjax_js }}"></script>
{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
"""


def export_offline_html(notebook: str | Path, target: str | Path, assets: RunAssets, student: bool = False) -> Path:
    """Write the page of ``notebook`` to ``target``, loading plotly.js and MathJax from ``assets``
    (no http(s) reference to a script, style or font); ``student`` leaves out cells tagged ``solution``."""
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter
    from traitlets.config import Config

    target = Path(target)
    exporter = HTMLExporter(
        template_name="lab",
        template_file=OFFLINE_TEMPLATE,
        extra_loaders=[DictLoader({OFFLINE_TEMPLATE: _OFFLINE_TEMPLATE_SOURCE})],
        config=Config(TagRemovePreprocessor={"enabled": student, "remove_cell_tags": {SOLUTION_TAG}}),
    )
    exporter.register_preprocessor(_page_instead_of_widget, enabled=True)
    urls = {"plotly_js": assets.plotly_js, "mathjax_js": assets.mathjax_js}
    resources = {"workbench_assets": {name: assets.relative_to(target.parent, path) for name, path in urls.items()}}
    resources["workbench_assets"]["mathjax_config"] = json.dumps(MATHJAX_CONFIG)
    body, _ = exporter.from_filename(str(notebook), resources=resources)
    return write_atomically(target, body)  # a full disk leaves no truncated page that a retry would refuse


def _page_instead_of_widget(nb, resources):
    """A live panel's output (viz.widgets) shows its page figure; widgets and their saved state (MBs) are dead offline."""
    nb.metadata.pop("widgets", None)
    for output in (output for cell in nb.cells for output in cell.get("outputs", [])):
        if WIDGET_VIEW in output.get("data", {}) and "text/html" in output["data"]:
            del output["data"][WIDGET_VIEW]
    return nb, resources


def export_html(notebook: Path, run_dir: Path | None = None) -> Path:
    """The runner's page: ``<notebook>.html`` beside the executed notebook, sharing the assets of ``run_dir``
    (default: the run folder of the runner's layout, ``run_dir_of``), whose ``figures/`` pages it links to them."""
    shared = ensure_assets(run_dir_of(notebook) if run_dir is None else run_dir)
    figures_dir = notebook.parent / "figures"
    if figures_dir.is_dir():
        link_figures(figures_dir, shared)
    return export_offline_html(notebook, notebook.with_suffix(".html"), shared)


def export_notebook(notebook: str | Path, target: str | Path | None = None, student: bool = False) -> Path:
    """``python -m workbench export``: the page of an executed notebook at ``target`` (default: beside it,
    ``<stem>.html``, or ``<stem>.student.html`` with ``student``), never over an existing file.

    The assets go to the run folder when the page is beside its notebook (``run_dir_of``), else beside the
    page. ValueError naming the path for a missing or unreadable notebook or an existing target."""
    import nbformat

    notebook = Path(notebook)
    if not notebook.is_file():
        raise ValueError(f"NOTEBOOK {notebook}: no such file")
    try:
        nbformat.read(notebook, as_version=4)
    except (
        ValueError,
        TypeError,
        AttributeError,
        nbformat.ValidationError,
    ) as exc:  # not JSON, not UTF-8, not a notebook
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise ValueError(f"NOTEBOOK {notebook}: not a Jupyter notebook ({reason})") from None
    default = notebook.with_name(f"{notebook.stem}.student.html" if student else f"{notebook.stem}.html")
    target = Path(target) if target is not None else default
    option = "-o" if target != default else "the default output"
    if target.exists():
        raise ValueError(f"{option} {target}: exists; nothing is overwritten (give another path with -o)")
    if not target.parent.is_dir():
        raise ValueError(f"{option} {target}: folder {target.parent} does not exist")
    beside = target.parent.resolve() == notebook.parent.resolve()
    return export_offline_html(
        notebook, target, ensure_assets(run_dir_of(notebook) if beside else target.parent), student
    )
