"""Display a plotly figure and, in a run, save it into the run folder's ``figures/``.

A notebook calls ``set_output_dir(output_dir)`` once with its ``output_dir``
parameter (None when run by hand). From then on ``show(fig, name)``:

* displays the figure; the headless renderer ``plotly_mimetype+workbench_html``
  gives each output the plotly MIME bundle (JupyterLab draws it with its plotly
  extension) and a ``text/html`` version, a div and a ``Plotly.newPlot`` call,
  that nbconvert's HTML export shows. Neither carries plotly.js nor a CDN
  script: the page around the output loads plotly.js (the runner's HTML export
  loads the run folder's shared copy, workbench.runs.assets), so the executed
  .ipynb stays small;
* writes ``figures/<name>.html`` (standalone; ``include_plotlyjs="directory"``
  puts one plotly.min.js beside it for the whole folder, which the runner then
  swaps for the run's shared copy) and ``figures/<name>.json``
  (``fig.to_json()``, for tests and re-plotting).
"""

from __future__ import annotations

import re
from pathlib import Path

import plotly.io as pio
from plotly.basedatatypes import BaseFigure
from plotly.io.base_renderers import MimetypeRenderer


class PageLoadsPlotlyRenderer(MimetypeRenderer):
    """``text/html``: the figure's div and ``Plotly.newPlot`` call, for a page that loads
    plotly.js itself (a global ``Plotly``). No plotly.js and no MathJax tag in the output,
    unlike plotly's ``notebook`` renderer (4.7 MB per notebook, a CDN MathJax per figure)."""

    def to_mimebundle(self, fig_dict: dict) -> dict[str, str]:
        html = pio.to_html(
            fig_dict,
            include_plotlyjs=False,
            include_mathjax=False,
            full_html=False,
            default_width="100%",
            default_height=525,
            validate=False,
        )
        return {"text/html": html}


pio.renderers["workbench_html"] = PageLoadsPlotlyRenderer()
HEADLESS_RENDERER = "plotly_mimetype+workbench_html"
FIGURES_SUBDIR = "figures"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

_figures_dir: Path | None = None


def set_output_dir(output_dir: str | Path | None, renderer: str | None = HEADLESS_RENDERER) -> None:
    """Save later figures under ``<output_dir>/figures`` and switch to ``renderer``; None turns saving off.

    Returns nothing (so a notebook cell ending with it shows no output); ``figures_dir()``
    gives the folder. The renderer is only set when ``output_dir`` is given, so
    interactive sessions keep their own.
    """
    global _figures_dir
    if output_dir is None:
        _figures_dir = None
        return
    _figures_dir = Path(output_dir) / FIGURES_SUBDIR
    _figures_dir.mkdir(parents=True, exist_ok=True)
    if renderer is not None and pio.renderers.default != renderer:
        pio.renderers.default = renderer  # re-assigning would re-run the renderers' activation


def figures_dir() -> Path | None:
    """The folder figures are saved into, or None when saving is off."""
    return _figures_dir


def _check_figure(fig: BaseFigure, name: str) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"name must be a file stem of letters, digits, '_', '.', '-' (got {name!r})")
    if not isinstance(fig, BaseFigure):
        raise ValueError(f"fig must be a plotly figure, got {type(fig).__name__}")


def save(fig: BaseFigure, name: str, directory: str | Path | None = None) -> list[Path]:
    """Write ``<directory>/<name>.html`` and ``<directory>/<name>.json``; returns both paths.

    ``directory`` defaults to the configured figures folder. Raises ValueError
    for a name that is not a plain file stem or when no folder is known.
    """
    _check_figure(fig, name)
    target = Path(directory) if directory is not None else _figures_dir
    if target is None:
        raise ValueError("directory is required when no output dir is set (call set_output_dir first)")
    target.mkdir(parents=True, exist_ok=True)
    html_path, json_path = target / f"{name}.html", target / f"{name}.json"
    fig.write_html(html_path, include_plotlyjs="directory", full_html=True)
    json_path.write_text(fig.to_json(), encoding="utf-8")
    return [html_path, json_path]


def show(fig: BaseFigure, name: str) -> None:
    """Display ``fig`` and save it (``save``) when an output dir is set.

    Returns nothing, so a notebook cell ending with it shows only the figure.
    """
    _check_figure(fig, name)
    if _figures_dir is not None:
        save(fig, name)
    fig.show()
