"""The report of a finished run: ``summary.csv``, ``summary_agg.csv`` and ``index.html``.

``summary.csv``: one row per notebook x sweep point (sweep values, status, each metric's mean as
``metric.<name>``). ``summary_agg.csv``: one row per notebook x sweep point x metric (mean, sample
std over the notebook's seeds, empty where n = 1, n, and the notebook's one-line description).
Only the ``metrics`` a notebook recorded are reported, never its parameters or detail tables.

``index.html`` is a list of :class:`Section` s (:func:`index_sections`: about, executions, sweep, metrics, figures),
each an ``<section id=...>`` with its heading, linked from the page's contents line; a new section is one more entry.
It loads the run's one plotly.js; every figure's JSON is in the page and drawn only while it is near the window.
The page is rendered from jinja2 templates shipped in the package (``workbench/resources/templates/``: the page
``index.html.j2``, a macro per section's body in ``index_sections.html.j2``), autoescaped: every value is shown as text
unless it is markup (pandas' tables, the sanitised results page, a figure's JSON).
"""

from __future__ import annotations

import functools
import html
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from markupsafe import Markup

from workbench.metrics_file import metric_statistics, write_atomically
from workbench.runs.assets import PRINT_CSS, PRINT_FIGURES_JS, PRINT_WIDTH, inline_plotly_js
from workbench.runs.execute import Outcome
from workbench.runs.results import forest_json, results_html
from workbench.runs.sanitize import offline_figure

METRIC_PREFIX = "metric."
DESCRIPTIONS = "descriptions"  # metrics.json's entry of one-line metric descriptions, shown in index.html
FIGURES_SUBDIR = "figures"  # as workbench.viz.figures saves them (runs does not import viz)
CAPTION_SUFFIX = ".caption.txt"  # figures/<name>.caption.txt: the notebook's sentence on the figure (viz.figures)


def summary_row(outcome: Outcome, run_dir: Path) -> dict[str, Any]:
    """One summary.csv row: identity, sweep values, status and every metric's mean."""
    execution = outcome.execution
    return {
        "notebook": execution.name,
        "point": execution.slug,
        **execution.point,
        "status": outcome.status,
        "failed_cell": outcome.failed_cell,
        "error": outcome.error,
        "duration_s": round(outcome.duration_s, 2),
        "folder": outcome.output_dir.relative_to(run_dir).as_posix(),
        **{f"{METRIC_PREFIX}{name}": stats["mean"] for name, stats in metric_statistics(outcome.metrics).items()},
    }


def metric_rows(outcomes: Sequence[Outcome], sweep_keys: Sequence[str] = ()) -> pd.DataFrame:
    """Long table: one row per successful notebook x sweep point x metric: mean, std (over the
    notebook's seeds; empty for one run), n and the notebook's description of the metric."""
    records = []
    for outcome in (outcome for outcome in outcomes if outcome.ok):
        execution = outcome.execution
        descriptions = outcome.metrics.get(DESCRIPTIONS)
        descriptions = descriptions if isinstance(descriptions, dict) else {}
        point = {
            "notebook": execution.name,
            "point": execution.slug,
            **{key: execution.point[key] for key in sweep_keys},
        }
        for name, stats in metric_statistics(outcome.metrics).items():
            std = stats["std"] if (stats["n"] or 0) > 1 else None
            records.append(
                {**point, "metric": name, **stats, "std": std, "description": str(descriptions.get(name, ""))}
            )
    columns = ["notebook", "point", *sweep_keys, "metric", "mean", "std", "n", "description"]
    return pd.DataFrame.from_records(records, columns=columns)


START_HERE = "05_pcl_vs_dice_walkthrough"  # the notebook a class or a newcomer opens first
ABOUT = (
    "The Imbalance Workbench compares learning objectives for imbalanced NLP data: cross-entropy and the "
    "Dice-loss family, the Propensity-Corrected Loss (PCL), masked-LM pre-training on true negatives and two-stage "
    "training with auxiliary labels. Each notebook walks through one paper, runs its experiments on the data its "
    "parameters name and prints its own numbers; this page is the report of one run of them: each notebook's page, "
    "its metrics (mean ± std over its seeds) and its figures."
)
TEMPLATES = "resources/templates"  # in the workbench package (package data)
INDEX_TEMPLATE = "index.html.j2"  # the page
SECTIONS_TEMPLATE = "index_sections.html.j2"  # a macro per section's body


def _as_text(value: Any) -> Markup:
    """A value as the page shows it: markup as it is, anything else as text, escaped as ``html.escape`` escapes it
    (``&quot;`` and ``&#x27;`` for the quotes, as the page has always written them)."""
    return value if isinstance(value, Markup) else Markup(html.escape(str(value)))


@functools.cache
def _templates() -> Any:
    """The jinja2 environment of index.html's templates, autoescaped: a value shows as text unless it is
    ``markupsafe.Markup`` (pandas' tables, the sanitised results page, a figure's JSON); a missing one is an error."""
    from jinja2 import Environment, PackageLoader, StrictUndefined

    return Environment(
        loader=PackageLoader("workbench", TEMPLATES),
        autoescape=True,
        finalize=_as_text,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=StrictUndefined,
    )


def index_template() -> Any:
    """The template of the page (``index.html.j2``): title, contents line, sections."""
    return _templates().get_template(INDEX_TEMPLATE)


def section_macros() -> Any:
    """The macros that render the sections' bodies (``index_sections.html.j2``): ``section_macros().about(...)``."""
    return _templates().get_template(SECTIONS_TEMPLATE).module


@dataclass(frozen=True)
class Section:
    """One part of index.html: ``<section id="{id}"><h2>{title}</h2>{body}</section>``; ``body`` is HTML."""

    id: str
    title: str
    body: str


@dataclass(frozen=True)
class PageFigure:
    """A figure as index.html holds it: its JSON (``json``, none for a saved page without it: then a link to the page
    ``href``) beside a placeholder ``height`` px tall that the page's script draws into while it is near the window;
    ``caption`` above it, linked to its own page ``href``."""

    caption: str = ""
    href: str = ""
    key: str = ""
    height: int = 0
    json: Markup | None = None


def page_figure(figure: dict, key: str, caption: str = "", href: str = "") -> PageFigure:
    """``figure`` (plotly's JSON) as the page draws it, under the placeholder id ``key``."""
    height = (figure.get("layout") or {}).get("height") or 450
    text = json.dumps(figure, separators=(",", ":")).replace("</", "<\\/")  # no </script> inside the script
    return PageFigure(caption, href, key, int(height), Markup(text))


def _existing(run_dir: Path, href: str) -> str | None:
    """``href`` (relative to the run folder) when its file exists: the page links only what is there."""
    return href if (run_dir / href).exists() else None


def _folder(outcome: Outcome, run_dir: Path) -> str:
    return outcome.output_dir.relative_to(run_dir).as_posix()


def _execution_row(row: pd.Series, run_dir: Path) -> dict[str, Any]:
    """One row of the executions table: identity, status (and where it failed), time and the files present."""
    where = f"cell {int(row['failed_cell'])}: " if pd.notna(row.get("failed_cell")) else ""
    files = {
        "html": f"{row['notebook']}.html",
        "ipynb": f"{row['notebook']}.ipynb",
        "params": "params.yaml",
        "metrics": "metrics.json",
    }
    return {
        "notebook": row["notebook"],
        "point": row["point"] if isinstance(row["point"], str) else "",
        "status": row["status"],
        "error": where + str(row["error"]) if pd.notna(row.get("error")) else "",
        "duration_s": row["duration_s"],
        "files": [
            (text, href) for text, name in files.items() if (href := _existing(run_dir, f"{row['folder']}/{name}"))
        ],
    }


def _executions(summary: pd.DataFrame, run_dir: Path) -> Section:
    rows = [_execution_row(row, run_dir) for _, row in summary.iterrows()]
    return Section("executions", "Executions", section_macros().executions(rows))


def notebook_title(notebook: Path) -> str:
    """The notebook's first markdown heading (``# 05 · PCL vs Dice: ...``) without its ``#``; else its stem."""
    try:
        cells = json.loads(notebook.read_text(encoding="utf-8")).get("cells", [])
    except (OSError, ValueError, AttributeError):
        return notebook.stem
    for cell in cells:
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else str(source)
        if cell.get("cell_type") == "markdown" and (heading := re.match(r"#\s+(.+)", text.lstrip())):
            return heading.group(1).strip()
    return notebook.stem


def _about(outcomes: Sequence[Outcome], summary: pd.DataFrame, run_dir: Path) -> Section:
    """What the workbench is, which notebook to open first, and each notebook of the run by its own title."""
    first = {outcome.execution.name: outcome for outcome in reversed(outcomes)}  # the first execution of each
    notebooks = [
        {
            "name": name,
            "title": notebook_title(outcome.execution.notebook),
            "page": _existing(run_dir, f"{_folder(outcome, run_dir)}/{name}.html"),
        }
        for name, outcome in sorted(first.items())
    ]
    start = first.get(START_HERE)
    body = section_macros().about(
        text=ABOUT,
        notebooks=notebooks,
        start_here=START_HERE if start else None,
        start_page=_existing(run_dir, f"{_folder(start, run_dir)}/{START_HERE}.html") if start else None,
        executions=len(summary),
        failed=int((summary["status"] == "failed").sum()),
    )
    return Section("about", "About this run", body)


def figure_caption(page: Path, figure: dict) -> str:
    """The sentence the notebook gave with the figure (``<name>.caption.txt``), else its title, else its name."""
    saved = page.with_name(page.stem + CAPTION_SUFFIX)
    if saved.is_file():
        return saved.read_text(encoding="utf-8").strip()
    title = (figure.get("layout") or {}).get("title")
    text = title.get("text") if isinstance(title, dict) else title
    return re.sub(r"<[^>]*>", " ", text).strip() if isinstance(text, str) and text.strip() else page.stem


def _saved_figures(folder: Path, run_dir: Path, first_key: int) -> list[PageFigure]:
    """The figures saved in ``folder``/figures, each under its caption and linked to its own page; keys counted from
    ``first_key``. A page saved without its JSON is a link to it."""
    shown = []
    for key, page in enumerate(sorted((folder / FIGURES_SUBDIR).glob("*.html")), start=first_key):
        saved = page.with_suffix(".json")
        figure = offline_figure(json.loads(saved.read_text(encoding="utf-8"))) if saved.is_file() else {}
        href = page.relative_to(run_dir).as_posix()
        caption = figure_caption(page, figure)
        shown.append(page_figure(figure, f"figure-{key}", caption, href) if figure else PageFigure(caption, href))
    return shown


def _figures(summary: pd.DataFrame, run_dir: Path, folded: bool) -> Section:
    """Every saved figure, one group per execution (folded when the run has many), each under its caption and linked
    to its own page."""
    groups = []
    count = 0
    for _, row in summary.iterrows():
        items = _saved_figures(run_dir / row["folder"], run_dir, count)
        count += len(items)
        point = row["point"] if isinstance(row["point"], str) and row["point"] else ""
        if items:
            groups.append({"label": f"{row['notebook']} {point}".strip(), "opened": not folded, "figures": items})
    return Section("figures", "Figures", section_macros().figures(groups))


def _metric_range(values: pd.Series, spreads: pd.Series) -> list[float] | None:
    """[0, 1] for a metric whose means are all in it (a rate, an F1, an accuracy), widened to its error bars;
    None (plotly's own range) otherwise."""
    means = [value for value in values if isinstance(value, (int, float)) and math.isfinite(value)]
    if not means or min(means) < 0 or max(means) > 1:
        return None
    std = spreads.fillna(0.0).astype(float)
    return [min(0.0, float((values - std).min())), max(1.0, float((values + std).max()))]


def _sweep_figures(aggregated: pd.DataFrame, sweep_keys: Sequence[str]) -> list[PageFigure]:
    """Each notebook's metrics against the first swept value (mean, error bars: std over the seeds), one line per
    combination of the other swept values; titled axes, and [0, 1] for a metric whose means lie in it."""
    import plotly.graph_objects as go

    if not sweep_keys or aggregated.empty:
        return []
    x_key = sweep_keys[0]
    others = list(sweep_keys[1:])
    parts = []
    for index, ((notebook, metric), rows) in enumerate(aggregated.groupby(["notebook", "metric"], sort=False)):
        description = next((text for text in rows["description"] if text), "")
        figure = go.Figure(
            layout={
                "title": {"text": f"{notebook}: {metric}", "subtitle": {"text": description}},
                "xaxis_title": x_key,
                "yaxis_title": metric,
                "height": 360,
                "showlegend": bool(others),
                "margin": {"t": 80},
            }
        )
        numeric = all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in rows[x_key])
        rows = rows.sort_values(x_key) if numeric else rows.assign(**{x_key: rows[x_key].map(str)})
        lines = rows[others].astype(str).agg(", ".join, axis=1) if others else pd.Series("", index=rows.index)
        for line in dict.fromkeys(lines):
            points = rows[lines == line]
            x, mean, std = (points[column].tolist() for column in (x_key, "mean", "std"))  # lists: readable in the page
            figure.add_scatter(x=x, y=mean, error_y={"array": std}, name=line, mode="lines+markers", cliponaxis=False)
        figure.update_xaxes(type=None if numeric else "category")
        figure.update_yaxes(range=_metric_range(rows["mean"], rows["std"]))
        parts.append(page_figure(json.loads(figure.to_json()), f"sweep-{index}"))  # its title says what it shows
    return parts


def _metrics_table(rows: pd.DataFrame, sweep_keys: Sequence[str]) -> str:
    """A long table that fits the window: point, metric, mean ± std (n) and the notebook's description."""
    shown = pd.DataFrame(
        {
            **({"point": rows["point"]} if sweep_keys else {}),
            "metric": rows["metric"],
            "mean ± std (n)": [
                f"{mean:.4g}" + (f" ± {std:.2g}" if pd.notna(std) else "") + f" ({int(n)})" if pd.notna(mean) else ""
                for mean, std, n in zip(rows["mean"], rows["std"], rows["n"].fillna(1))
            ],
            "description": rows["description"],
        }
    )
    return shown.to_html(index=False, escape=True, na_rep="")


def _metrics(aggregated: pd.DataFrame, summary: pd.DataFrame, sweep_keys: Sequence[str]) -> Section:
    """One long table per notebook (folded when it is long), and summary.csv's wide table folded in a scroll box."""
    tables = [
        {
            "notebook": str(notebook),
            "rows": len(rows),
            "opened": len(rows) <= 40,
            "html": Markup(_metrics_table(rows, sweep_keys)),
        }
        for notebook, rows in aggregated.groupby("notebook", sort=False)
    ]
    body = section_macros().metrics(tables, Markup(_html_table(summary)))
    return Section("metrics", "Metrics", body)


def _html_table(frame: pd.DataFrame) -> str:
    """The table as HTML with blanks for missing values (None in text columns too) and 4 significant digits."""
    text_columns = frame.select_dtypes(exclude="number").columns
    shown = frame.astype({column: object for column in text_columns})
    shown[text_columns] = shown[text_columns].where(shown[text_columns].notna(), "")
    return shown.to_html(index=False, na_rep="", float_format="{:.4g}".format)


def index_sections(
    run_dir: Path,
    outcomes: Sequence[Outcome],
    summary: pd.DataFrame,
    aggregated: pd.DataFrame,
    sweep_keys: Sequence[str] = (),
) -> list[Section]:
    """index.html's sections in order: about (what the workbench is, where to start), executions, the results page
    (results.md, when the run has one), the sweep's figures, metrics, figures. Another part of the report is one more
    :class:`Section` in this list."""
    macros = section_macros()
    sections = [_about(outcomes, summary, run_dir), _executions(summary, run_dir)]
    results = results_html(run_dir)  # the claim rows of results.md, when the notebooks recorded some
    if results:
        forest = forest_json(run_dir)
        caption = "Forest plot: every tested row's difference and its 95% CI"
        shown = page_figure(forest, "results-forest", caption) if forest else None
        sections.append(Section("results", "Results: each paper's claim", macros.results(Markup(results), shown)))
    if sweep_keys and not aggregated.empty:
        title = f"Metrics against {sweep_keys[0]} (mean ± std over the seeds)"
        sections.append(Section("sweep", title, macros.sweep(_sweep_figures(aggregated, sweep_keys))))
    sections.append(_metrics(aggregated, summary, sweep_keys))
    sections.append(_figures(summary, run_dir, folded=len(summary) > 5))
    return sections


def write_report(
    run_dir: str | Path, outcomes: Sequence[Outcome], sweep_keys: Sequence[str] = (), interrupted: bool = False
) -> Path:
    """Write ``summary.csv``, ``summary_agg.csv`` and ``index.html`` (:func:`index_sections` rendered by
    :func:`index_template`) into ``run_dir``; returns the index's path."""
    run_dir = Path(run_dir)
    summary = pd.DataFrame.from_records([summary_row(outcome, run_dir) for outcome in outcomes])
    aggregated = metric_rows(outcomes, sweep_keys)
    write_atomically(run_dir / "summary.csv", summary.to_csv(index=False))  # a full disk: a ValueError naming it
    write_atomically(run_dir / "summary_agg.csv", aggregated.to_csv(index=False))
    sections = index_sections(run_dir, outcomes, summary, aggregated, sweep_keys)
    page = index_template().render(
        title=f"Imbalance Workbench: run {run_dir.name}",
        interrupted=interrupted,
        sections=[{"id": section.id, "title": section.title, "body": Markup(section.body)} for section in sections],
        print_css=Markup(PRINT_CSS),
        print_width=PRINT_WIDTH,
        plotly_js=Markup(inline_plotly_js()),  # one file: copied alone, it still draws
        print_figures_js=Markup(PRINT_FIGURES_JS),
    )
    write_atomically(run_dir / "index.html", page)
    return run_dir / "index.html"
