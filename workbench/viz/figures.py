"""Show a plotly figure; in a run (``set_output_dir``) save it as ``figures/<name>.html`` (a plotly.min.js beside it,
swapped by the runner for the run's) and ``.json``, and its caption, one sentence saying what it shows, as
``<name>.caption.txt`` (the run's index.html prints it above the figure). The headless renderer's outputs (plotly's
MIME bundle for JupyterLab, a ``Plotly.newPlot`` div for the HTML export) carry neither plotly.js nor a CDN script."""

from __future__ import annotations

import re
from pathlib import Path

import plotly.io as pio
from plotly.basedatatypes import BaseFigure
from plotly.io.base_renderers import MimetypeRenderer


class PageLoadsPlotlyRenderer(MimetypeRenderer):
    """``text/html``: the figure's div and ``Plotly.newPlot`` call, for a page that loads plotly.js itself
    (plotly's ``notebook`` renderer puts 4.7 MB of plotly.js and a CDN MathJax into every notebook)."""

    def to_mimebundle(self, fig_dict: dict) -> dict[str, str]:
        options = {"include_plotlyjs": False, "include_mathjax": False, "full_html": False, "validate": False}
        return {"text/html": pio.to_html(fig_dict, default_width="100%", default_height=525, **options)}


pio.renderers["workbench_html"] = PageLoadsPlotlyRenderer()
HEADLESS_RENDERER = "plotly_mimetype+workbench_html"
FIGURES_SUBDIR = "figures"
CAPTION_SUFFIX = ".caption.txt"  # figures/<name>.caption.txt: the sentence the notebook gave with the figure
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_figures_dir: Path | None = None


def set_output_dir(output_dir: str | Path | None, renderer: str | None = HEADLESS_RENDERER) -> None:
    """Save later figures under ``<output_dir>/figures`` and switch to ``renderer``; None turns saving off
    (and leaves the renderer of an interactive session alone)."""
    global _figures_dir
    _figures_dir = None if output_dir is None else Path(output_dir) / FIGURES_SUBDIR
    if _figures_dir is not None:
        _figures_dir.mkdir(parents=True, exist_ok=True)
        if renderer is not None and pio.renderers.default != renderer:
            pio.renderers.default = renderer  # re-assigning would re-run the renderers' activation


def _check_figure(fig: BaseFigure, name: str, caption: str | None = None) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"name: must be a file stem of letters, digits, '_', '.', '-', got {name!r}")
    if caption is not None and (not isinstance(caption, str) or not caption.strip()):
        raise ValueError(f"caption: must be a sentence saying what the figure shows, or None, got {caption!r}")
    if not isinstance(fig, BaseFigure):
        raise ValueError(f"fig: must be a plotly figure, got {type(fig).__name__}")


def save(fig: BaseFigure, name: str, directory: str | Path | None = None, caption: str | None = None) -> list[Path]:
    """Write ``<directory>/<name>.html`` and ``.json`` (``directory`` defaults to the figures folder), and
    ``<name>.caption.txt`` when a ``caption`` is given; returns the files written."""
    _check_figure(fig, name, caption)
    target = Path(directory) if directory is not None else _figures_dir
    if target is None:
        raise ValueError("directory: required when no output dir is set (call set_output_dir first)")
    target.mkdir(parents=True, exist_ok=True)
    fig.write_html(target / f"{name}.html", include_plotlyjs="directory", full_html=True)
    (target / f"{name}.json").write_text(fig.to_json(), encoding="utf-8")
    written = [target / f"{name}.html", target / f"{name}.json"]
    if caption is not None:
        written.append(target / f"{name}{CAPTION_SUFFIX}")
        written[-1].write_text(caption.strip() + "\n", encoding="utf-8")
    return written


def show(fig: BaseFigure, name: str, caption: str | None = None) -> None:
    """Display ``fig`` and save it (``save``, with ``caption``: one sentence saying what the figure shows, for the
    run's index) when an output dir is set; returns nothing (no cell output)."""
    _check_figure(fig, name, caption)
    if _figures_dir is not None:
        save(fig, name, caption=caption)
    fig.show()
