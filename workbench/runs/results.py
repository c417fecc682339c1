"""The results page of a run: ``run.json`` (the command, dates and machine) and ``results.md``, printed from the
notebooks' metrics.json ``evidence`` entries by ``workbench.evidence.results_page``; its section of ``index.html``;
``python -m workbench results RUN_DIR -o docs/results.md`` writes the same page elsewhere (docs/runner.md)."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from workbench.metrics_file import read_metrics, write_json
from workbench.runs.sanitize import clean_html
from workbench.threads import usable_cores

RUN_FILE = "run.json"
RESULTS_FILE = "results.md"
EVIDENCE = "evidence"  # a notebook's metrics.json entry of claim rows (workbench.evidence.record)


def _cpu_name() -> str:
    """The CPU model from /proc/cpuinfo (Linux), else ``platform.processor()``, else "unknown"."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def machine() -> dict[str, Any]:
    """What the page says of the machine: platform, CPU model, usable cores, GPU (if any), Python and torch versions."""
    import torch

    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return {
        "platform": platform.platform(),
        "cpu": _cpu_name(),
        "usable cores": usable_cores(),
        "gpu": gpu,
        "python": platform.python_version(),
        "torch": torch.__version__,
    }


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S %Z")


def start_record(run_dir: Path, command: str | None, params_set: str, jobs: int, threads: int) -> dict[str, Any]:
    """Write ``run.json`` as a run starts: the command (``sys.argv`` when not given), the parameter set, the start date,
    the machine, and how many notebooks ran at once with how many threads."""
    header = {
        "run_id": run_dir.name,
        "command": command or " ".join([Path(sys.executable).name, *sys.argv]),
        "params_set": params_set,
        "started": _now(),
        "finished": None,
        "jobs": jobs,
        "threads": threads,
        "machine": machine(),
        "workbench_data": os.environ.get("WORKBENCH_DATA"),
    }
    write_json(run_dir / RUN_FILE, header)
    return header


def finish_record(run_dir: Path) -> dict[str, Any]:
    """Add the end date to ``run.json`` (written by :func:`start_record`)."""
    header = json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8"))
    header["finished"] = _now()
    write_json(run_dir / RUN_FILE, header)
    return header


def evidence_sections(run_dir: str | Path, folders: Sequence[str] | None = None) -> dict[str, Mapping[str, Any]]:
    """Each notebook folder's ``evidence`` (metrics.json), keyed by folder (``02_propensity_corrected_loss``, with a
    sweep point ``02_propensity_corrected_loss/epsilon=0.1``), in ``folders`` order (default: sorted)."""
    run_dir = Path(run_dir)
    if folders is None:
        folders = sorted(path.parent.relative_to(run_dir).as_posix() for path in run_dir.glob("**/metrics.json"))
    sections = {}
    for folder in folders:
        evidence = read_metrics(run_dir / folder).get(EVIDENCE)
        if isinstance(evidence, Mapping):
            sections[folder] = evidence
    return sections


def results_markdown(run_dir: str | Path, folders: Sequence[str] | None = None) -> str:
    """The results page of ``run_dir`` (``run.json`` and the notebooks' evidence); ValueError without ``run.json``."""
    run_dir = Path(run_dir)
    if not (run_dir / RUN_FILE).is_file():
        raise ValueError(
            f"run folder {str(run_dir)!r}: has no {RUN_FILE}; give a folder that python -m workbench run made"
        )
    header = json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8"))
    from workbench.evidence import results_page  # pandas and scipy: imported when a page is printed

    return results_page(header, evidence_sections(run_dir, folders))


def write_results(run_dir: str | Path, folders: Sequence[str]) -> Path | None:
    """Write ``results.md`` into the run folder when a notebook recorded evidence; its path, else None."""
    run_dir = Path(run_dir)
    if not evidence_sections(run_dir, folders):
        return None
    path = run_dir / RESULTS_FILE
    path.write_text(results_markdown(run_dir, folders), encoding="utf-8")
    return path


def results_html(run_dir: Path) -> str:
    """The body of ``index.html``'s results section: a link to ``results.md`` and the page as HTML (mistune, with
    tables; its title left out, the section has its own) through the sanitiser of every page
    (``workbench.runs.sanitize.clean_html``: no image from the network, no script, iframe or remote style), or "" when
    the run has none."""
    path = run_dir / RESULTS_FILE
    if not path.is_file():
        return ""
    import mistune

    text = path.read_text(encoding="utf-8").split("\n", 1)[1]  # the page's first line is its "# " title
    body = mistune.create_markdown(plugins=["table"])(text)
    for level in (3, 2):  # one level below the section's own h2
        body = body.replace(f"<h{level}", f"<h{level + 1}").replace(f"</h{level}>", f"</h{level + 1}>")
    return f'<p><a href="{RESULTS_FILE}">{RESULTS_FILE}</a></p>\n{clean_html(body)}'


def write_page(run_dir: str | Path, output: str | Path) -> Path:
    """``python -m workbench results``: the results page of ``run_dir`` written to ``output`` (replacing it: the page
    is generated, e.g. docs/results.md); ValueError when the run recorded no claims."""
    run_dir = Path(run_dir)
    page = results_markdown(run_dir)  # a folder without run.json is refused first
    if not evidence_sections(run_dir):
        raise ValueError(f"run folder {str(run_dir)!r}: no notebook recorded claims (metrics.json 'evidence')")
    output = Path(output)
    output.write_text(page, encoding="utf-8")
    return output
