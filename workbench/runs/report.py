"""The report of a finished run: ``summary.csv``, ``summary_agg.csv`` and ``index.html``.

``summary.csv`` has one row per notebook x sweep point: its parameters of the sweep, status,
and every metric's mean as ``metric.<name>``. ``summary_agg.csv`` has one row per notebook x
sweep point x metric with the mean, the sample standard deviation over the notebook's seeds
(empty where n = 1) and n. Only the ``metrics`` a notebook recorded are reported, never its
parameters or detail tables.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.runs.execute import Outcome
from workbench.records import metric_statistics

METRIC_PREFIX = "metric."


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
    notebook's seeds; empty for one run) and n."""
    records = []
    for outcome in outcomes:
        if not outcome.ok:
            continue
        execution = outcome.execution
        for name, stats in metric_statistics(outcome.metrics).items():
            std = stats["std"] if (stats["n"] or 0) > 1 else None
            records.append(
                {
                    "notebook": execution.name,
                    "point": execution.slug,
                    **{key: execution.point[key] for key in sweep_keys},
                    "metric": name,
                    "mean": stats["mean"],
                    "std": std,
                    "n": stats["n"],
                }
            )
    return pd.DataFrame.from_records(records, columns=["notebook", "point", *sweep_keys, "metric", "mean", "std", "n"])


def write_summaries(
    run_dir: str | Path, outcomes: Sequence[Outcome], sweep_keys: Sequence[str] = ()
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Write ``summary.csv`` and ``summary_agg.csv`` into ``run_dir``; return both tables."""
    run_dir = Path(run_dir)
    summary = pd.DataFrame.from_records([summary_row(outcome, run_dir) for outcome in outcomes])
    aggregated = metric_rows(outcomes, sweep_keys)
    summary.to_csv(run_dir / "summary.csv", index=False)
    aggregated.to_csv(run_dir / "summary_agg.csv", index=False)
    return summary, aggregated


def _link(href: str, text: str, run_dir: Path) -> str:
    if not (run_dir / href).exists():
        return ""
    return f'<a href="{html.escape(href)}">{html.escape(text)}</a>'


def _status_cell(row: pd.Series) -> str:
    if row["status"] == "ok":
        return '<span class="ok">ok</span>'
    where = f"cell {int(row['failed_cell'])}: " if pd.notna(row.get("failed_cell")) else ""
    return f'<span class="failed">failed</span> {html.escape(where + str(row["error"]))}'


def _runs_table(summary: pd.DataFrame, run_dir: Path) -> str:
    lines = ["<table><tr><th>notebook</th><th>point</th><th>status</th><th>time (s)</th><th>files</th></tr>"]
    for _, row in summary.iterrows():
        folder = row["folder"]
        links = " ".join(
            link
            for link in (
                _link(f"{folder}/{row['notebook']}.html", "html", run_dir),
                _link(f"{folder}/{row['notebook']}.ipynb", "ipynb", run_dir),
                _link(f"{folder}/params.yaml", "params", run_dir),
                _link(f"{folder}/metrics.json", "metrics", run_dir),
            )
            if link
        )
        point = row["point"] if isinstance(row["point"], str) else ""
        lines.append(
            f"<tr><td>{html.escape(row['notebook'])}</td><td>{html.escape(point)}</td>"
            f"<td>{_status_cell(row)}</td><td>{row['duration_s']:.1f}</td><td>{links}</td></tr>"
        )
    lines.append("</table>")
    return "\n".join(lines)


def _figures_section(summary: pd.DataFrame, run_dir: Path) -> str:
    parts = []
    for folder in summary["folder"]:
        for figure in sorted((run_dir / folder / "figures").glob("*.html")):
            href = html.escape(figure.relative_to(run_dir).as_posix())
            parts.append(
                f'<figure><figcaption><a href="{href}">{href}</a></figcaption>'
                f'<iframe src="{href}" loading="lazy" width="100%" height="480" frameborder="0"></iframe></figure>'
            )
    return "\n".join(parts) or "<p>No figures were saved.</p>"


_STYLE = """
body { font-family: sans-serif; margin: 2em; }
table { border-collapse: collapse; margin-bottom: 2em; }
td, th { border: 1px solid #ccc; padding: 4px 8px; text-align: left; }
.ok { color: #1a7f37; font-weight: bold; }
.failed { color: #cf222e; font-weight: bold; }
figure { margin: 0 0 2em 0; }
"""


def _html_table(frame: pd.DataFrame) -> str:
    """The table as HTML with blanks for missing values (None in text columns too) and 4 significant digits."""
    text_columns = frame.select_dtypes(exclude="number").columns
    shown = frame.astype({column: object for column in text_columns})
    shown[text_columns] = shown[text_columns].where(shown[text_columns].notna(), "")
    return shown.to_html(index=False, na_rep="", float_format="{:.4g}".format)


def write_index(run_dir: str | Path, summary: pd.DataFrame, aggregated: pd.DataFrame) -> Path:
    """``index.html``: every execution with status and links, both summary tables and the saved figures."""
    run_dir = Path(run_dir)
    failed = int((summary["status"] != "ok").sum()) if len(summary) else 0
    body = [
        f"<h1>Run {html.escape(run_dir.name)}</h1>",
        f"<p>{len(summary)} executions, {failed} failed.</p>",
        "<h2>Executions</h2>",
        _runs_table(summary, run_dir) if len(summary) else "<p>Nothing ran.</p>",
        '<h2>Metrics: mean ± std over each notebook\'s seeds (<a href="summary_agg.csv">summary_agg.csv</a>)</h2>',
        _html_table(aggregated),
        '<h2>All executions (<a href="summary.csv">summary.csv</a>)</h2>',
        _html_table(summary),
        "<h2>Figures</h2>",
        _figures_section(summary, run_dir) if len(summary) else "",
    ]
    page = (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
        f"<title>Run {html.escape(run_dir.name)}</title><style>{_STYLE}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )
    path = run_dir / "index.html"
    path.write_text(page, encoding="utf-8")
    return path
