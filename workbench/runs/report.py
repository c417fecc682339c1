"""The report of a finished run: ``summary.csv``, ``summary_agg.csv`` and ``index.html``.

``summary.csv``: one row per notebook x sweep point (sweep values, status, each metric's mean as
``metric.<name>``). ``summary_agg.csv``: one row per notebook x sweep point x metric (mean, sample
std over the notebook's seeds, empty where n = 1, n, and the notebook's one-line description).
Only the ``metrics`` a notebook recorded are reported, never its parameters or detail tables.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.metrics_file import metric_statistics
from workbench.runs.assets import ASSETS_DIR, PLOTLY_JS
from workbench.runs.execute import Outcome

METRIC_PREFIX = "metric."
DESCRIPTIONS = "descriptions"  # metrics.json's entry of one-line metric descriptions, shown in index.html


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


def _figures_section(summary: pd.DataFrame, run_dir: Path) -> str:
    """Every saved figure in an iframe as tall as the figure (its JSON's layout height), so no
    figure sits in a scroll box of its own."""
    parts = []
    for folder in summary["folder"]:
        for figure in sorted((run_dir / folder / "figures").glob("*.html")):
            href = html.escape(figure.relative_to(run_dir).as_posix())
            saved = figure.with_suffix(".json")
            layout = json.loads(saved.read_text(encoding="utf-8")).get("layout", {}) if saved.is_file() else {}
            height = (layout.get("height") or 480) + 20  # + the page's margins
            parts.append(
                f'<figure><figcaption><a href="{href}">{href}</a></figcaption><iframe src="{href}" loading="lazy" '
                f'scrolling="no" style="width: 100%; height: {height}px; border: 0"></iframe></figure>'
            )
    return "\n".join(parts) or "<p>No figures were saved.</p>"


def _sweep_figures(aggregated: pd.DataFrame, sweep_keys: Sequence[str]) -> str:
    """Each notebook's metrics against the first swept value (mean, error bars: std over the seeds),
    one line per combination of the other swept values."""
    import plotly.graph_objects as go
    import plotly.io as pio

    if not sweep_keys or aggregated.empty:
        return ""
    x_key = sweep_keys[0]
    others = list(sweep_keys[1:])
    parts = []
    for (notebook, metric), rows in aggregated.groupby(["notebook", "metric"], sort=False):
        figure = go.Figure(
            layout={"title": f"{notebook}: {metric}", "xaxis_title": x_key, "height": 360, "showlegend": bool(others)}
        )
        numeric = all(isinstance(value, (int, float)) and not isinstance(value, bool) for value in rows[x_key])
        rows = rows.sort_values(x_key) if numeric else rows.assign(**{x_key: rows[x_key].map(str)})
        lines = rows[others].astype(str).agg(", ".join, axis=1) if others else pd.Series("", index=rows.index)
        for line in dict.fromkeys(lines):
            points = rows[lines == line]
            x, mean, std = (points[column].tolist() for column in (x_key, "mean", "std"))  # lists: readable in the page
            figure.add_scatter(x=x, y=mean, error_y={"array": std}, name=line, mode="lines+markers")
        figure.update_xaxes(type=None if numeric else "category")
        parts.append(pio.to_html(figure, include_plotlyjs=False, full_html=False, default_height=360))
    return '<div class="grid">' + "\n".join(parts) + "</div>"


_STYLE = """body { font-family: sans-serif; margin: 2em; } table { border-collapse: collapse; margin-bottom: 2em; }
td, th { border: 1px solid #ccc; padding: 4px 8px; text-align: left; } figure { margin: 0 0 2em 0; }
.ok { color: #1a7f37; font-weight: bold; } .failed { color: #cf222e; font-weight: bold; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(480px, 1fr)); gap: 1em; }"""


def _html_table(frame: pd.DataFrame) -> str:
    """The table as HTML with blanks for missing values (None in text columns too) and 4 significant digits."""
    text_columns = frame.select_dtypes(exclude="number").columns
    shown = frame.astype({column: object for column in text_columns})
    shown[text_columns] = shown[text_columns].where(shown[text_columns].notna(), "")
    return shown.to_html(index=False, na_rep="", float_format="{:.4g}".format)


def write_report(
    run_dir: str | Path, outcomes: Sequence[Outcome], sweep_keys: Sequence[str] = (), interrupted: bool = False
) -> Path:
    """Write ``summary.csv``, ``summary_agg.csv`` and ``index.html`` (every execution with its status and
    files, the sweep figures, both tables, the saved figures) into ``run_dir``; returns the index's path."""
    run_dir = Path(run_dir)
    summary = pd.DataFrame.from_records([summary_row(outcome, run_dir) for outcome in outcomes])
    aggregated = metric_rows(outcomes, sweep_keys)
    summary.to_csv(run_dir / "summary.csv", index=False)
    aggregated.to_csv(run_dir / "summary_agg.csv", index=False)
    title = f"Run {html.escape(run_dir.name)}"
    stopped = (
        '<p class="failed">Interrupted (Ctrl-C or SIGTERM): the executions marked "interrupted" did not finish.</p>'
    )
    body = [
        f"<h1>{title}</h1>",
        stopped if interrupted else "",
        f"<p>{len(summary)} executions, {int((summary['status'] == 'failed').sum())} failed.</p>",
        "<h2>Executions</h2>",
        _runs_table(summary, run_dir),
        f"<h2>Metrics against {html.escape(sweep_keys[0])} (mean ± std over the seeds)</h2>" if sweep_keys else "",
        _sweep_figures(aggregated, sweep_keys),
        '<h2>Metrics: mean ± std over each notebook\'s seeds (<a href="summary_agg.csv">summary_agg.csv</a>)</h2>',
        _html_table(aggregated),
        '<h2>All executions (<a href="summary.csv">summary.csv</a>)</h2>',
        _html_table(summary),
        "<h2>Figures</h2>",
        _figures_section(summary, run_dir),
    ]
    head = (
        f'<meta charset="utf-8"><title>{title}</title><style>{_STYLE}</style>'
        f'<script src="{ASSETS_DIR}/{PLOTLY_JS}"></script>'
    )
    page = (
        f"<!DOCTYPE html>\n<html><head>{head}</head>\n<body>\n"
        + "\n".join(part for part in body if part)
        + "\n</body></html>\n"
    )
    (run_dir / "index.html").write_text(page, encoding="utf-8")
    return run_dir / "index.html"
