"""The report of a finished run: ``summary.csv``, ``summary_agg.csv`` and ``index.html``.

``summary.csv`` has one row per notebook x sweep point x seed, with every
numeric top-level metric from metrics.json as a ``metric.<name>`` column.
``summary_agg.csv`` aggregates each metric over the seeds of a sweep point
(successful executions only): mean, sample standard deviation (ddof = 1, empty
for a single seed) and n.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any, Sequence

import pandas as pd

METRIC_PREFIX = "metric."
GROUP_COLUMNS = ["notebook", "point"]


def aggregate_over_seeds(summary: pd.DataFrame, sweep_keys: Sequence[str] = ()) -> pd.DataFrame:
    """Long table: one row per notebook x sweep point x metric with mean, std (ddof=1) and n over seeds."""
    columns = [*GROUP_COLUMNS, *sweep_keys, "metric", "mean", "std", "n"]
    metric_columns = [column for column in summary.columns if column.startswith(METRIC_PREFIX)]
    succeeded = summary[summary["status"] == "ok"] if len(summary) else summary
    records = []
    for (notebook, point), group in succeeded.groupby(GROUP_COLUMNS, sort=False):
        for column in metric_columns:
            values = group[column].dropna().astype(float)
            if values.empty:
                continue
            records.append(
                {
                    "notebook": notebook,
                    "point": point,
                    **{key: group[key].iloc[0] for key in sweep_keys},
                    "metric": column.removeprefix(METRIC_PREFIX),
                    "mean": values.mean(),
                    "std": values.std(ddof=1) if len(values) > 1 else float("nan"),
                    "n": len(values),
                }
            )
    return pd.DataFrame.from_records(records, columns=columns)


def write_summaries(
    run_dir: str | Path, rows: list[dict[str, Any]], sweep_keys: Sequence[str] = ()
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Write ``summary.csv`` and ``summary_agg.csv`` into ``run_dir``; return both tables."""
    summary = pd.DataFrame.from_records(rows)
    aggregated = aggregate_over_seeds(summary, sweep_keys)
    summary.to_csv(Path(run_dir) / "summary.csv", index=False)
    aggregated.to_csv(Path(run_dir) / "summary_agg.csv", index=False)
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
    lines = ["<table><tr><th>notebook</th><th>cell</th><th>status</th><th>time (s)</th><th>files</th></tr>"]
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
        lines.append(
            f"<tr><td>{html.escape(row['notebook'])}</td><td>{html.escape(str(row['cell'] or ''))}</td>"
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
        '<h2>Aggregated over seeds (<a href="summary_agg.csv">summary_agg.csv</a>)</h2>',
        _html_table(aggregated),
        '<h2>All executions (<a href="summary.csv">summary.csv</a>)</h2>',
        _html_table(summary),
        "<h2>Figures</h2>",
        _figures_section(summary, run_dir) if len(summary) else "",
    ]
    page = (
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
        f"<title>Run {html.escape(run_dir.name)}</title><style>{_STYLE}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )
    path = run_dir / "index.html"
    path.write_text(page, encoding="utf-8")
    return path
