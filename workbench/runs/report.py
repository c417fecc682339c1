"""The report of a finished run: ``summary.csv``, ``summary_agg.csv`` and ``index.html``.

``summary.csv``: one row per notebook x sweep point (sweep values, status, each metric's mean as
``metric.<name>``). ``summary_agg.csv``: one row per notebook x sweep point x metric (mean, sample
std over the notebook's seeds, empty where n = 1, n, and the notebook's one-line description).
Only the ``metrics`` a notebook recorded are reported, never its parameters or detail tables.

``index.html`` is a list of :class:`Section` s (:func:`index_sections`: about, executions, sweep, metrics, figures),
each an ``<section id=...>`` with its heading, linked from the page's contents line; a new section is one more entry.
It loads the run's one plotly.js; every figure's JSON is in the page and drawn only while it is near the window.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

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


@dataclass(frozen=True)
class Section:
    """One part of index.html: ``<section id="{id}"><h2>{title}</h2>{body}</section>``; ``body`` is HTML."""

    id: str
    title: str
    body: str

    def html(self) -> str:
        return f'<section id="{self.id}">\n<h2>{html.escape(self.title)}</h2>\n{self.body}\n</section>'


def _link(href: str, text: str, run_dir: Path) -> str:
    if not (run_dir / href).exists():
        return ""
    return f'<a href="{html.escape(href)}">{html.escape(text)}</a>'


def _status_cell(row: pd.Series) -> str:
    if row["status"] == "ok":
        return '<span class="ok">ok</span>'
    where = f"cell {int(row['failed_cell'])}: " if pd.notna(row.get("failed_cell")) else ""
    error = html.escape(where + str(row["error"])) if pd.notna(row.get("error")) else ""
    return f'<span class="failed">{html.escape(row["status"])}</span> {error}'


def _runs_table(summary: pd.DataFrame, run_dir: Path) -> str:
    lines = ["<table><tr><th>notebook</th><th>point</th><th>status</th><th>time (s)</th><th>files</th></tr>"]
    for _, row in summary.iterrows():
        files = {"html": f"{row['notebook']}.html", "ipynb": f"{row['notebook']}.ipynb", "params": "params.yaml"}
        links = " ".join(
            _link(f"{row['folder']}/{name}", text, run_dir)
            for text, name in {**files, "metrics": "metrics.json"}.items()
        )
        point = row["point"] if isinstance(row["point"], str) else ""
        lines.append(
            f"<tr><td>{html.escape(row['notebook'])}</td><td>{html.escape(point)}</td>"
            f"<td>{_status_cell(row)}</td><td>{row['duration_s']:.1f}</td><td>{links}</td></tr>"
        )
    lines.append("</table>")
    return "\n".join(lines)


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
    notebooks = {outcome.execution.name: outcome for outcome in reversed(outcomes)}  # the first execution of each
    items = []
    for name, outcome in sorted(notebooks.items()):
        folder = outcome.output_dir.relative_to(run_dir).as_posix()
        page = _link(f"{folder}/{name}.html", "page", run_dir) or "no page"
        title = html.escape(notebook_title(outcome.execution.notebook))
        items.append(f"<li><strong>{html.escape(name)}</strong>: {title} ({page})</li>")
    start = ""
    if START_HERE in notebooks:
        folder = notebooks[START_HERE].output_dir.relative_to(run_dir).as_posix()
        page = _link(f"{folder}/{START_HERE}.html", "its page", run_dir)
        start = (
            f"<p><strong>Start here:</strong> for a class or a first look, open <strong>{START_HERE}</strong>"
            f"{f' ({page})' if page else ''}: imbalance, Dice's gradient and PCL on one data set, with sliders. "
            "Then the notebooks 01 to 04 go deeper, one paper each.</p>"
        )
    failed = int((summary["status"] == "failed").sum())
    counts = f'<p>{len(summary)} executions, {failed} failed (<a href="#executions">Executions</a>).</p>'
    return Section(
        "about", "About this run", f"<p>{html.escape(ABOUT)}</p>\n{start}\n<ul>{''.join(items)}</ul>\n{counts}"
    )


def _figure_div(figure: dict, key: str, caption: str = "", href: str = "") -> str:
    """A placeholder as tall as the figure and the figure's JSON beside it: the page's script draws it while it is
    near the window (one plotly.js for every figure, and only a screenful of plots in memory). ``caption`` above it,
    with a link to the figure's own page ``href``."""
    height = (figure.get("layout") or {}).get("height") or 450
    text = json.dumps(figure, separators=(",", ":")).replace("</", "<\\/")  # no </script> inside the script
    link = f' (<a href="{html.escape(href)}">page</a>)' if href else ""
    return (
        f"<figure>{f'<figcaption>{html.escape(caption)}{link}</figcaption>' if caption else ''}"
        f'<div class="plot" data-figure="{key}" style="height: {int(height)}px"></div>'
        f'<script type="application/json" id="{key}">{text}</script></figure>'
    )


def figure_caption(page: Path, figure: dict) -> str:
    """The sentence the notebook gave with the figure (``<name>.caption.txt``), else its title, else its name."""
    saved = page.with_name(page.stem + CAPTION_SUFFIX)
    if saved.is_file():
        return saved.read_text(encoding="utf-8").strip()
    title = (figure.get("layout") or {}).get("title")
    text = title.get("text") if isinstance(title, dict) else title
    return re.sub(r"<[^>]*>", " ", text).strip() if isinstance(text, str) and text.strip() else page.stem


def _figures(summary: pd.DataFrame, run_dir: Path, folded: bool) -> Section:
    """Every saved figure, one group per execution (folded when the run has many), each under its caption and linked
    to its own page."""
    groups, count = [], 0
    for _, row in summary.iterrows():
        parts = []
        for page in sorted((run_dir / row["folder"] / FIGURES_SUBDIR).glob("*.html")):
            saved = page.with_suffix(".json")
            figure = offline_figure(json.loads(saved.read_text(encoding="utf-8"))) if saved.is_file() else {}
            href = html.escape(page.relative_to(run_dir).as_posix())
            if figure:
                parts.append(_figure_div(figure, f"figure-{count}", figure_caption(page, figure), href))
            else:
                parts.append(f'<p><a href="{href}">{html.escape(figure_caption(page, figure))}</a></p>')
            count += 1
        if parts:
            point = row["point"] if isinstance(row["point"], str) and row["point"] else ""
            label = html.escape(f"{row['notebook']} {point}".strip())
            opened = "" if folded else " open"
            groups.append(
                f"<details{opened}><summary>{label} ({len(parts)} figures)</summary>\n"
                + "\n".join(parts)
                + "</details>"
            )
    return Section("figures", "Figures", "\n".join(groups) or "<p>No figures were saved.</p>")


def _metric_range(values: pd.Series, spreads: pd.Series) -> list[float] | None:
    """[0, 1] for a metric whose means are all in it (a rate, an F1, an accuracy), widened to its error bars;
    None (plotly's own range) otherwise."""
    means = [value for value in values if isinstance(value, (int, float)) and math.isfinite(value)]
    if not means or min(means) < 0 or max(means) > 1:
        return None
    std = spreads.fillna(0.0).astype(float)
    return [min(0.0, float((values - std).min())), max(1.0, float((values + std).max()))]


def _sweep_figures(aggregated: pd.DataFrame, sweep_keys: Sequence[str]) -> str:
    """Each notebook's metrics against the first swept value (mean, error bars: std over the seeds), one line per
    combination of the other swept values; titled axes, and [0, 1] for a metric whose means lie in it."""
    import plotly.graph_objects as go

    if not sweep_keys or aggregated.empty:
        return ""
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
        parts.append(_figure_div(json.loads(figure.to_json()), f"sweep-{index}"))  # its title says what it shows
    return '<div class="grid">' + "\n".join(parts) + "</div>"


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
    parts = []
    for notebook, rows in aggregated.groupby("notebook", sort=False):
        opened = "" if len(rows) > 40 else " open"
        parts.append(
            f"<details{opened}><summary>{html.escape(str(notebook))} ({len(rows)} rows)</summary>"
            f"{_metrics_table(rows, sweep_keys)}</details>"
        )
    wide = (
        '<details><summary>All executions, one column per metric (<a href="summary.csv">summary.csv</a>)</summary>'
        f'<div class="scroll">{_html_table(summary)}</div></details>'
    )
    intro = (
        '<p>Mean ± sample std over each notebook\'s seeds (n: the seeds); <a href="summary_agg.csv">summary_agg.csv'
        "</a> holds the same table.</p>"
    )
    return Section("metrics", "Metrics", intro + "\n".join(parts or ["<p>No metrics were recorded.</p>"]) + wide)


_STYLE = (
    """body { font-family: sans-serif; margin: 2em; max-width: 1400px; }
table { border-collapse: collapse; margin-bottom: 1em; max-width: 100%; }
td, th { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; overflow-wrap: anywhere; }
figure { margin: 0 0 2em 0; } figcaption { margin-bottom: 0.3em; } summary { cursor: pointer; margin: 0.5em 0; }
.plot { width: 100%; } .scroll { overflow-x: auto; } nav { margin-bottom: 1em; }
.ok { color: #1a7f37; font-weight: bold; } .failed { color: #cf222e; font-weight: bold; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(480px, 100%), 1fr)); gap: 1em; }
@media print { body { margin: 0; max-width: none; } .grid { display: block; } .scroll { overflow: visible; } }
"""
    + PRINT_CSS
)

# Draws a figure while its placeholder is within a screen or two of the window and purges it when it leaves, so a
# sweep's hundreds of figures cost one plotly.js and a screenful of plots (not one page and plotly.js each). Printing
# ("Save as PDF" too) opens every folded part and draws every figure at the printed width (PRINT_FIGURES_JS sizes the
# ones already drawn); afterwards the parts fold again and the figures far from the window are purged again.
_DRAW_NEAR_WINDOW = f"""<script>
let printing = false;
const draw = (plot, layout) => {{
  const figure = JSON.parse(document.getElementById(plot.dataset.figure).textContent);
  plot.dataset.drawn = "1";
  Plotly.newPlot(plot, figure.data || [], {{...(figure.layout || {{}}), ...layout}}, {{responsive: true}});
}};
const plots = new IntersectionObserver((entries) => {{
  for (const entry of entries) {{
    const plot = entry.target;
    if (entry.isIntersecting && !plot.dataset.drawn) {{
      draw(plot, {{}});
    }} else if (!entry.isIntersecting && plot.dataset.drawn && !printing) {{
      Plotly.purge(plot);
      delete plot.dataset.drawn;
    }}
  }}
}}, {{rootMargin: "1500px 0px"}});
const placeholders = () => document.querySelectorAll("div.plot[data-figure]");
placeholders().forEach((plot) => plots.observe(plot));
window.addEventListener("beforeprint", () => {{
  printing = true;
  document.querySelectorAll("details:not([open])").forEach((part) => {{
    part.open = true;
    part.dataset.printed = "1";
  }});
  placeholders().forEach((plot) => {{ if (!plot.dataset.drawn) draw(plot, {{width: {PRINT_WIDTH}}}); }});
}});
window.addEventListener("afterprint", () => {{
  printing = false;
  document.querySelectorAll("details[data-printed]").forEach((part) => {{
    part.open = false;
    delete part.dataset.printed;
  }});
  plots.disconnect();
  placeholders().forEach((plot) => plots.observe(plot));  // purges again what is far from the window
}});
</script>"""


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
    sections = [_about(outcomes, summary, run_dir), Section("executions", "Executions", _runs_table(summary, run_dir))]
    results = results_html(run_dir)  # the claim rows of results.md, when the notebooks recorded some
    forest = forest_json(run_dir)
    if results and forest:
        results += _figure_div(forest, "results-forest", "Forest plot: every tested row's difference and its 95% CI")
    if results:
        sections.append(Section("results", "Results: each paper's claim", results))
    if sweep_keys and not aggregated.empty:
        title = f"Metrics against {sweep_keys[0]} (mean ± std over the seeds)"
        sections.append(Section("sweep", title, _sweep_figures(aggregated, sweep_keys)))
    sections.append(_metrics(aggregated, summary, sweep_keys))
    sections.append(_figures(summary, run_dir, folded=len(summary) > 5))
    return sections


def write_report(
    run_dir: str | Path, outcomes: Sequence[Outcome], sweep_keys: Sequence[str] = (), interrupted: bool = False
) -> Path:
    """Write ``summary.csv``, ``summary_agg.csv`` and ``index.html`` (:func:`index_sections`) into ``run_dir``;
    returns the index's path."""
    run_dir = Path(run_dir)
    summary = pd.DataFrame.from_records([summary_row(outcome, run_dir) for outcome in outcomes])
    aggregated = metric_rows(outcomes, sweep_keys)
    write_atomically(run_dir / "summary.csv", summary.to_csv(index=False))  # a full disk: a ValueError naming it
    write_atomically(run_dir / "summary_agg.csv", aggregated.to_csv(index=False))
    title = f"Imbalance Workbench: run {html.escape(run_dir.name)}"
    stopped = (
        '<p class="failed">Interrupted (Ctrl-C or SIGTERM): the executions marked "interrupted" did not finish.</p>'
    )
    sections = index_sections(run_dir, outcomes, summary, aggregated, sweep_keys)
    contents = " · ".join(f'<a href="#{section.id}">{html.escape(section.title)}</a>' for section in sections)
    body = [f"<h1>{title}</h1>", stopped if interrupted else "", f"<nav>{contents}</nav>"]
    body += [section.html() for section in sections]
    scripts = f"<script>{inline_plotly_js()}</script>{PRINT_FIGURES_JS}"  # one file: copied alone, it still draws
    head = f'<meta charset="utf-8"><title>{title}</title><style>{_STYLE}</style>{scripts}'
    page = (
        f"<!DOCTYPE html>\n<html><head>{head}</head>\n<body>\n"
        + "\n".join(part for part in body if part)
        + f"\n{_DRAW_NEAR_WINDOW}\n</body></html>\n"
    )
    write_atomically(run_dir / "index.html", page)
    return run_dir / "index.html"
