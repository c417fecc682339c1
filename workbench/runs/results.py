"""The results page of a run: ``run.json`` (the command, dates, machine and notebook folders) and ``results.md`` with
its figures (``results-figures/``), printed from the recorded folders' metrics.json ``evidence`` entries (checked by
``workbench.evidence.check_record``, judged by ``workbench.evidence.assess``, laid out by ``runs.results_page``); its
section of ``index.html``; ``python -m workbench results RUN_DIR -o docs/results.md`` writes the same page elsewhere
(docs/runner.md)."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from workbench.metrics_file import write_atomically, write_json
from workbench.runs.sanitize import clean_html
from workbench.threads import usable_cores

RUN_FILE = "run.json"
RESULTS_FILE = "results.md"
METRICS_FILE = "metrics.json"
EVIDENCE = "evidence"  # a notebook's metrics.json entry of claim rows (workbench.evidence.record)
FOLDERS = "folders"  # run.json: the run's notebook folders, the only ones its page reads
FIGURES_SUFFIX = "-figures"  # results.md's figures: results-figures/ beside it


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


def start_record(
    run_dir: Path, command: str | None, params_set: str, jobs: int, threads: int, folders: Sequence[str] = ()
) -> dict[str, Any]:
    """Write ``run.json`` as a run starts: the command (``sys.argv`` when not given), the parameter set, the start date,
    the machine, how many notebooks ran at once with how many threads, and the notebook ``folders`` of the run
    (relative to ``run_dir``): the only folders its results page reads."""
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
        FOLDERS: list(folders),
    }
    write_json(run_dir / RUN_FILE, header)
    return header


def _read_json(path: Path) -> dict[str, Any]:
    """A JSON object from ``path``; ValueError naming the file (and where the text stops being JSON)."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON ({error.msg} at line {error.lineno}, column {error.colno})") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: cannot be read ({error})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path}: must hold a JSON object, got {type(value).__name__}")
    return value


def finish_record(run_dir: Path) -> dict[str, Any]:
    """Add the end date to ``run.json`` (written by :func:`start_record`)."""
    header = _read_json(run_dir / RUN_FILE)
    header["finished"] = _now()
    write_json(run_dir / RUN_FILE, header)
    return header


def read_header(run_dir: str | Path) -> dict[str, Any]:
    """``run.json`` of a run folder, with the notebook folders it recorded; ValueError naming the file and key."""
    path = Path(run_dir) / RUN_FILE
    if not path.is_file():
        raise ValueError(
            f"run folder {str(run_dir)!r}: has no {RUN_FILE}; give a folder that python -m workbench run made"
        )
    header = _read_json(path)
    folders = header.get(FOLDERS)
    if not isinstance(folders, list) or not all(isinstance(folder, str) for folder in folders):
        raise ValueError(f"{path}: {FOLDERS}: must list the run's notebook folders, got {folders!r}")
    for folder in folders:
        if Path(folder).is_absolute() or ".." in Path(folder).parts:
            raise ValueError(f"{path}: {FOLDERS}: must be folders inside the run folder, got {folder!r}")
    return header


def evidence_sections(run_dir: str | Path, folders: Sequence[str] | None = None) -> dict[str, Mapping[str, Any]]:
    """Each notebook folder's ``evidence`` (metrics.json), keyed by folder (``02_propensity_corrected_loss``, with a
    sweep point ``02_propensity_corrected_loss/epsilon=0.1``), for the ``folders`` the run recorded in run.json (in
    their order) and no other: a folder copied in from another run is not read. Each entry is checked
    (``workbench.evidence.check_record``); ValueError naming the metrics.json file and the key."""
    from workbench.evidence import check_record

    run_dir = Path(run_dir)
    if folders is None:
        folders = read_header(run_dir)[FOLDERS]
    sections = {}
    for folder in folders:
        path = run_dir / folder / METRICS_FILE
        if not path.is_file():  # a notebook that failed before writing metrics.json
            continue
        evidence = _read_json(path).get(EVIDENCE)
        if evidence is None:
            continue
        try:
            check_record(evidence)
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from None
        sections[folder] = evidence
    return sections


def _page_and_figures(run_dir: Path, figures_dir: str) -> tuple[str, dict[str, str]]:
    """The results page of ``run_dir`` and its static figures (file name -> SVG text, and ``forest.json``, the plotly
    figure), the page linking them under ``figures_dir``."""
    from workbench.evidence import assess
    from workbench.runs.evidence_figures import forest_entries, forest_figure, forest_svg, reliability_svg
    from workbench.runs.results_page import results_page

    header = read_header(run_dir)
    sections = evidence_sections(run_dir, header[FOLDERS])
    rows = [row for evidence in sections.values() for row in evidence["claims"]]
    assessed = iter(assess(rows))  # one family: every tested row of the page
    judged = {name: [next(assessed) for _ in evidence["claims"]] for name, evidence in sections.items()}
    files: dict[str, str] = {}
    links: dict[str, str] = {}
    entries = forest_entries(sections, judged)
    if entries:
        files["forest.svg"] = forest_svg(entries)
        files["forest.json"] = forest_figure(entries).to_json()
        links["forest"] = f"{figures_dir}/forest.svg"
    for name, evidence in sections.items():
        if evidence.get("reliability"):
            file = name.replace("/", "_") + "-reliability.svg"
            files[file] = reliability_svg(name, evidence["reliability"])
            links[name] = f"{figures_dir}/{file}"
    return results_page(header, sections, judged, links), files


def _write(page_path: Path, page: str, files: Mapping[str, str]) -> Path:
    """The page and its figures folder (``<stem>-figures`` beside it, its old figures replaced)."""
    folder = page_path.with_name(page_path.stem + FIGURES_SUFFIX)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"{folder}: must be a folder for the page's figures, got a file")
    folder.mkdir(exist_ok=True)
    for old in folder.glob("*"):
        if old.is_file() and old.name not in files and old.suffix in (".svg", ".json"):
            old.unlink()
    for name, text in files.items():
        write_atomically(folder / name, text)
    return write_atomically(page_path, page)


def results_markdown(run_dir: str | Path) -> str:
    """The results page of ``run_dir`` (``run.json`` and the notebooks' evidence); ValueError without ``run.json``."""
    run_dir = Path(run_dir)
    return _page_and_figures(run_dir, Path(RESULTS_FILE).stem + FIGURES_SUFFIX)[0]


def write_results(run_dir: str | Path) -> Path | None:
    """Write ``results.md`` and its figures into the run folder when a notebook recorded evidence; its path, else
    None."""
    run_dir = Path(run_dir)
    if not evidence_sections(run_dir):
        return None
    page, files = _page_and_figures(run_dir, Path(RESULTS_FILE).stem + FIGURES_SUFFIX)
    return _write(run_dir / RESULTS_FILE, page, files)


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


def forest_json(run_dir: Path) -> dict[str, Any] | None:
    """The forest plot's plotly figure (``results-figures/forest.json``) for the run's index, or None."""
    path = run_dir / (Path(RESULTS_FILE).stem + FIGURES_SUFFIX) / "forest.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _check_output(run_dir: Path, output: Path) -> None:
    """Refuse an output the page cannot be written to, or one that would replace a file of the run: anything inside
    the run folder but its own ``results.md`` (run.json, a metrics.json, a notebook: the run could never print its
    page again)."""
    if output.is_dir():
        raise ValueError(f"-o {str(output)!r}: is a folder; give the page's file name, e.g. {output / RESULTS_FILE}")
    if not output.parent.is_dir():
        raise ValueError(f"-o {str(output)!r}: its folder {str(output.parent)!r} does not exist")
    resolved, run = output.resolve(), run_dir.resolve()
    if resolved.is_relative_to(run) and resolved != run / RESULTS_FILE:
        raise ValueError(
            f"-o {str(output)!r}: lies inside the run folder {str(run_dir)!r}, whose files are the page's inputs; "
            f"write the page outside it, or to {run_dir / RESULTS_FILE}"
        )


def write_page(run_dir: str | Path, output: str | Path) -> Path:
    """``python -m workbench results``: the results page of ``run_dir`` written to ``output`` (replacing it: the page
    is generated, e.g. docs/results.md) with its figures in ``<output stem>-figures/`` beside it; ValueError when the
    run recorded no claims, or when ``output`` is a folder, lies in a missing folder or inside the run folder (but its
    own results.md)."""
    run_dir, output = Path(run_dir), Path(output)
    read_header(run_dir)  # a folder without run.json is refused first
    _check_output(run_dir, output)
    if not evidence_sections(run_dir):
        raise ValueError(f"run folder {str(run_dir)!r}: no notebook recorded claims (metrics.json 'evidence')")
    page, files = _page_and_figures(run_dir, output.stem + FIGURES_SUFFIX)
    return _write(output, page, files)
