"""The GPU window of issue 33 (stage 1) as one command: the CUDA tests, the pre-training of models/workbench-zh-mini
inside a time budget, its held-out perplexity, its publication and a one-seed QBQTC check against the same
architecture from scratch, every log, timing and result written into the folder the device tool brings back.

    source .device-kit/setup.sh && bash scripts/gpu_run.sh        # on the GPU machine (docs/gpu_window.md)

``scripts/gpu_run.sh`` calls ``run``; the other subcommands are its steps, and ``unpack`` is for afterwards:

    python scripts/gpu_window.py run --out OUT [--work-dir W] [--micro]   the whole window (GPU; --micro: a CPU dry run)
    python scripts/gpu_window.py environment                              versions, the GPU (JSON)
    python scripts/gpu_window.py prepare CONFIG [KEY=VALUE ...]           encode and cache a pretrain config's corpus
    python scripts/gpu_window.py unpack FILES_AT TARGET                   the published folder from the returned pieces

Each step runs as its own process group with a deadline counted from the command's start (``GPU_RUN_T0``, epoch
seconds; default: when ``run`` starts): one that overruns is stopped, one that fails is recorded, and the steps
after it that need it are skipped. ``summary.json`` in OUT is rewritten after every step.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import traceback
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve()
ROOT = SCRIPT.parents[1]
CONFIG = "params/pretrain/workbench-zh-mini.yaml"
MODEL_NAME = "workbench-zh-mini"
PEAK_BF16_TFLOPS = 790.0
"""The bf16 rate the share of peak is taken of: an 8192^3 bf16 matrix product measured 769 to 798 TFLOP/s on the
device tool's H100 and H200 (its KINDS.md); the H100 SXM data sheet says 989 dense."""
# What the device tool brings back from OUT (its README, Limits).
RETURN_MAX_FILES = 8
RETURN_MAX_FILE_BYTES = 16 * 2**20
RETURN_MAX_TOTAL_BYTES = 64 * 2**20
RETURN_MAX_FOLDERS = 2
RETURN_NAME = re.compile(r"[A-Za-z0-9._-]+")
PIECE_BYTES = 15 * 2**20


@dataclass(frozen=True)
class Plan:
    """When each step must end, in seconds from the command's start, and what the steps are given."""

    cuda_tests_by: float
    prepare_by: float
    pretrain_by: float  # pre-training, its last evaluation and its save included, ends by then
    pretrain_reserve: float  # of the time left before pretrain_by: the run's start (cached corpus, model) and end
    pretrain_kill: float  # a pre-training still running then is stopped
    publish_by: float
    evidence_by: float
    shortest_budget: float  # a shorter time budget is not worth a pre-training
    longest_budget: float | None
    pretrain_overrides: tuple[str, ...]
    evidence_arguments: tuple[str, ...]

    def time_budget(self, elapsed: float) -> int | None:
        """``training.time_budget_s`` for a pre-training started ``elapsed`` seconds into the command: it ends by
        ``pretrain_by``; None when that leaves less than ``shortest_budget``."""
        budget = self.pretrain_by - elapsed - self.pretrain_reserve
        if self.longest_budget is not None:
            budget = min(budget, self.longest_budget)
        return int(budget) if budget >= self.shortest_budget else None


GPU = Plan(
    cuda_tests_by=180,
    prepare_by=330,
    pretrain_by=420,
    pretrain_reserve=45,
    pretrain_kill=470,
    publish_by=500,
    evidence_by=525,
    shortest_budget=30,
    longest_budget=None,
    pretrain_overrides=("training.dataloader_num_workers=8", "training.quiet=true"),
    evidence_arguments=("--seeds", "0", "--jobs", "2"),
)
MICRO = Plan(  # the same steps on a CPU at micro scale: a few hundred documents and pairs, fp32
    cuda_tests_by=420,
    prepare_by=300,
    pretrain_by=480,
    pretrain_reserve=60,
    pretrain_kill=600,
    publish_by=660,
    evidence_by=900,
    shortest_budget=5,
    longest_budget=20,
    pretrain_overrides=(
        "data.max_train_samples=300",
        "data.num_proc=2",
        "training.per_device_train_batch_size=32",
        "training.per_device_eval_batch_size=32",
        "training.precision=fp32",
        "training.dataloader_num_workers=1",
        "training.logging_steps=5",
        "training.quiet=true",
    ),
    evidence_arguments=(
        *("--seeds", "0", "--jobs", "2", "--train-samples", "200", "--eval-samples", "200"),
        *("--epochs", "1", "--max-length", "32"),
    ),
)


def pretraining_figures(metrics: dict[str, Any], peak_tflops: float = PEAK_BF16_TFLOPS) -> dict[str, Any]:
    """Throughput and held-out figures of a pretrain_mlm run's ``metrics``. Tokens: the training blocks' text tokens
    ([CLS], [SEP] and padding not counted) times the epochs run; FLOPs estimated as 6 x parameters x tokens (forward
    and backward of every weight: attention's score products left out, the word embeddings counted as if multiplied
    at every position, though only the tied output layer multiplies them, at the masked positions), taken of
    ``peak_tflops``."""
    last = metrics["epochs"][-1]
    tokens = last["epoch"] * metrics["tokens_per_epoch"]
    seconds = metrics["train_runtime"]
    parameters = metrics["num_parameters"]["total"]
    tflops = 6 * parameters * tokens / seconds / 1e12
    return {
        "steps": last["step"],
        "epochs": last["epoch"],
        "tokens": round(tokens),
        "train_runtime_s": seconds,
        "tokens_per_second": tokens / seconds,
        "parameters": parameters,
        "flops_estimate": "6 x parameters x tokens",
        "tflops_per_second": tflops,
        "peak_bf16_tflops": peak_tflops,
        "share_of_peak": tflops / peak_tflops,
        "perplexity": metrics["perplexity"],
        "eval_loss": metrics["eval_loss"],
        "eval_masked_tokens": last["eval_masked_tokens"],
        "eval_blocks": metrics["blocks"]["eval"],
        "train_blocks": metrics["blocks"]["train"],
        "corpus_characters": metrics["corpus_characters"],
        "share_before_first_step": metrics["share_before_first_step"],
        "run_seconds": metrics["time"],
    }


def cuda_test_counts(junit: Path) -> dict[str, int]:
    """Tests, failures, errors, skipped and passed of a pytest ``--junitxml`` report, and its seconds."""
    suite = ElementTree.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    counts: dict[str, Any] = {key: int(suite.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")}
    counts["passed"] = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    counts["seconds"] = float(suite.get("time", "nan"))
    return counts


def number(text: str) -> Any:
    """``text`` as an int or a float where it reads as one (a CSV field), else as it is."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def pack_folder(folder: Path, out: Path, stem: str, piece_bytes: int = PIECE_BYTES) -> dict[str, Any]:
    """``folder`` as an uncompressed tar (its files at the top) cut into ``out/<stem>.tar.NN`` pieces of at most
    ``piece_bytes``; returns the pieces, the tar's size and sha256 (what :func:`unpack` checks)."""
    whole = out / f".{stem}.tar"
    with tarfile.open(whole, "w") as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.add(path, arcname=str(path.relative_to(folder)))
    pieces = []
    with whole.open("rb") as stream:
        for number, piece in enumerate(iter(lambda: stream.read(piece_bytes), b"")):
            name = f"{stem}.tar.{number:02d}"
            (out / name).write_bytes(piece)
            pieces.append(name)
    packed = {"pieces": pieces, "bytes": whole.stat().st_size, "sha256": sha256(whole)}
    whole.unlink()
    return packed


def unpack(files_at: Path, target: Path, stem: str = MODEL_NAME) -> list[str]:
    """The folder :func:`pack_folder` packed into ``files_at`` (its summary.json names the pieces and their
    sha256), extracted into ``target`` (new or empty); returns the files. ValueError for a missing piece, another
    checksum, a target that holds files or a member outside the folder."""
    summary = json.loads((files_at / "summary.json").read_text(encoding="utf-8"))
    packed = summary.get("model", {}).get("packed")
    if not packed:
        raise ValueError(
            f"files_at: {str(files_at / 'summary.json')!r} names no packed model (the publish step failed)"
        )
    missing = [name for name in packed["pieces"] if not (files_at / name).is_file()]
    if missing:
        raise ValueError(f"files_at: {', '.join(missing)} missing from {str(files_at)!r}")
    if target.exists() and any(target.iterdir()):
        raise ValueError(f"target: {str(target)!r} already holds files; choose a new folder")
    target.mkdir(parents=True, exist_ok=True)
    whole = target / f".{stem}.tar"
    with whole.open("wb") as stream:
        for name in packed["pieces"]:
            stream.write((files_at / name).read_bytes())
    try:
        if sha256(whole) != packed["sha256"]:
            raise ValueError(f"files_at: the pieces of {stem} do not give the tar summary.json names (sha256 differs)")
        with tarfile.open(whole) as archive:
            members = archive.getmembers()
            for member in members:
                if not member.isfile() or member.name.startswith("/") or ".." in Path(member.name).parts:
                    raise ValueError(f"files_at: {member.name!r} in the tar is not a file inside the folder")
            for member in members:
                (target / member.name).parent.mkdir(parents=True, exist_ok=True)
                (target / member.name).write_bytes(archive.extractfile(member).read())
    finally:
        whole.unlink()
    return sorted(member.name for member in members)


def pack_steps(steps: Path, out: Path) -> str:
    """Every step's files (logs, metrics, reports) as ``out/steps.tar.gz``."""
    name = "steps.tar.gz"
    with tarfile.open(out / f".{name}", "w:gz") as archive:
        archive.add(steps, arcname="steps")
    os.replace(out / f".{name}", out / name)
    return name


def returnable_problems(out: Path) -> list[str]:
    """What in ``out`` the device tool would not bring back (its README's limits); empty when all of it comes."""
    problems = []
    files = []
    for path in sorted(out.rglob("*")):
        relative = path.relative_to(out)
        if any(not RETURN_NAME.fullmatch(part) for part in relative.parts):
            problems.append(f"{relative}: a name of other characters than letters, digits, '.', '_' and '-'")
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            problems.append(f"{relative}: not a plain file or folder")
        elif path.is_file():
            files.append(path)
            if len(relative.parts) - 1 > RETURN_MAX_FOLDERS:
                problems.append(f"{relative}: more than {RETURN_MAX_FOLDERS} folders down")
            if path.stat().st_size > RETURN_MAX_FILE_BYTES:
                problems.append(f"{relative}: {path.stat().st_size:,} bytes, over {RETURN_MAX_FILE_BYTES:,}")
    if len(files) > RETURN_MAX_FILES:
        problems.append(f"{len(files)} files, over {RETURN_MAX_FILES}")
    total = sum(path.stat().st_size for path in files)
    if total > RETURN_MAX_TOTAL_BYTES:
        problems.append(f"{total:,} bytes in all, over {RETURN_MAX_TOTAL_BYTES:,}")
    return problems


def in_repository(part: Any) -> Any:
    """A path under the repository relative to it (the steps run there, and a command shown reads so); else ``part``."""
    return part.relative_to(ROOT) if isinstance(part, Path) and part.is_relative_to(ROOT) else part


@dataclass
class Step:
    """One step of the window: its command, log and deadline (seconds from the command's start), what it did."""

    name: str
    argv: list[str]
    log: Path
    deadline: float
    status: str = "not run"
    rc: int | None = None
    start_s: float | None = None
    end_s: float | None = None
    process: Any = dataclasses.field(default=None, repr=False)

    def record(self) -> dict[str, Any]:
        seconds = None if self.start_s is None or self.end_s is None else round(self.end_s - self.start_s, 1)
        return {
            "status": self.status,
            "rc": self.rc,
            "start_s": self.start_s,
            "end_s": self.end_s,
            "seconds": seconds,
            "deadline_s": self.deadline,
            "command": shlex.join(self.argv),
            "log": f"steps/{self.log.name}",
        }


class Window:
    """The run: the clock, the driver's log, the steps, ``summary.json`` in ``out``."""

    def __init__(self, out: Path, work: Path, plan: Plan, micro: bool, start: float) -> None:
        self.out, self.work, self.plan, self.micro, self.start = out, work, plan, micro, start
        self.steps_dir = work / "steps"
        self.steps_dir.mkdir(parents=True, exist_ok=True)
        self.summary: dict[str, Any] = {"micro": micro, "plan": dataclasses.asdict(plan), "steps": {}}
        self.log_file = (out / "gpu_run.log").open("a", encoding="utf-8")
        self.running: list[Step] = []

    def elapsed(self) -> float:
        return round(time.time() - self.start, 1)

    def say(self, message: str) -> None:
        line = f"[{self.elapsed():6.1f} s] {message}"
        print(line, flush=True)
        self.log_file.write(line + "\n")
        self.log_file.flush()

    def save(self) -> None:
        self.summary["elapsed_s"] = self.elapsed()
        (self.out / ".summary.json").write_text(json.dumps(self.summary, indent=2, default=str), encoding="utf-8")
        os.replace(self.out / ".summary.json", self.out / "summary.json")

    def checkpoint(self) -> None:
        """summary.json and steps.tar.gz (every step's files) in ``out`` as they are now."""
        self.save()
        pack_steps(self.steps_dir, self.out)

    def step(self, name: str, argv: list[Any], deadline: float) -> Step:
        """A step whose command is ``argv`` (paths under the repository shown relative to it: the steps run there)."""
        return Step(name, [str(in_repository(part)) for part in argv], self.steps_dir / f"{name}.log", deadline)

    def stop(self, reason: str) -> None:
        """Stop every step still running (the command itself is being stopped)."""
        for step in list(self.running):
            stop_group(step.process, grace=3.0)
            self.running.remove(step)
            step.rc, step.status, step.end_s = step.process.returncode, f"stopped: {reason}", self.elapsed()
            self.summary["steps"][step.name] = step.record()
        self.say(f"stopped: {reason}")

    def begin(self, step: Step) -> Step:
        step.start_s = self.elapsed()
        self.say(f"{step.name}: started, deadline {step.deadline:.0f} s: {shlex.join(step.argv)}")
        group = {"process_group": 0} if sys.version_info >= (3, 11) else {"preexec_fn": os.setpgrp}
        with step.log.open("w", encoding="utf-8") as log:  # its own group (no new session: the tool ends it with us)
            step.process = subprocess.Popen(step.argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, **group)
        step.status = "running"
        self.running.append(step)
        return step

    def finish(self, step: Step) -> Step:
        """Wait for ``step`` until its deadline, then stop its process group."""
        try:
            step.rc = step.process.wait(timeout=max(0.0, step.deadline - self.elapsed()))
            step.status = "ok" if step.rc == 0 else "failed"
        except subprocess.TimeoutExpired:
            stop_group(step.process)
            step.rc, step.status = step.process.returncode, "timed out"
        self.running.remove(step)
        step.end_s = self.elapsed()
        self.say(f"{step.name}: {step.status} (exit {step.rc}) after {step.end_s - step.start_s:.1f} s")
        self.summary["steps"][step.name] = step.record()
        self.save()
        return step

    def run(self, step: Step) -> Step:
        return self.finish(self.begin(step))

    def skip(self, step: Step, reason: str) -> Step:
        step.status = f"skipped: {reason}"
        self.say(f"{step.name}: {step.status}")
        self.summary["steps"][step.name] = step.record()
        self.save()
        return step


def stop_group(process: subprocess.Popen, grace: float = 10.0) -> None:
    """SIGTERM to the process group of ``process`` (its DataLoader workers, its pool), SIGKILL after ``grace`` s."""
    for sent in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sent)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


class Stopped(Exception):
    """The command is being stopped (SIGTERM, SIGINT)."""


def raise_stopped(number: int, frame: Any) -> None:
    raise Stopped(signal.Signals(number).name)


def run_window(out: Path, work: Path, plan: Plan, micro: bool, start: float) -> dict[str, Any]:
    """Every step of the window (module docstring); returns the summary also written to ``out/summary.json``. A
    SIGTERM or SIGINT stops the running steps and still writes what was done."""
    window = Window(out, work, plan, micro, start)
    handlers = {number: signal.signal(number, raise_stopped) for number in (signal.SIGTERM, signal.SIGINT)}
    try:
        steps(window)
    except Stopped as stopped:
        window.stop(str(stopped))
    except Exception as error:  # the driver's own fault: what was done still comes back
        window.summary["driver_error"] = traceback.format_exc()
        window.say(window.summary["driver_error"])
        window.stop(f"the driver failed: {type(error).__name__}: {error}")
    finally:
        window.checkpoint()
        window.summary["returned_problems"] = returnable_problems(out)
        window.say(f"done; what would not come back: {window.summary['returned_problems'] or 'nothing'}")
        window.checkpoint()
        window.log_file.close()
        for number, handler in handlers.items():
            signal.signal(number, handler)
    return window.summary


def steps(window: Window) -> None:
    """The steps in their order: environment; the CUDA tests beside the corpus preparation; the pre-training in
    its time budget and its figures; the publication, packed into ``out``; the QBQTC check."""
    out, work, plan = window.out, window.work, window.plan
    python, data = sys.executable, Path(os.environ["WORKBENCH_DATA"])
    run_dir, model_dir, evidence_dir = work / "pretrain", work / MODEL_NAME, work / "evidence"
    window.say(f"the GPU window{' at micro scale (CPU dry run)' if window.micro else ''}: out {out}, work {work}")

    environment = window.run(window.step("environment", [python, SCRIPT, "environment"], window.elapsed() + 120))
    try:
        window.summary["environment"] = json.loads(environment.log.read_text(encoding="utf-8").splitlines()[-1])
    except (ValueError, IndexError) as error:
        window.summary["environment"] = {"error": f"no JSON line in {environment.log.name}: {error}"}

    junit = window.steps_dir / "cuda-tests.xml"
    pytest = [
        python,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        f"--junitxml={junit}",
        "tests/test_losses_cuda.py",
    ]
    cuda_tests = window.begin(window.step("cuda-tests", pytest, plan.cuda_tests_by))
    overrides = [f"output_dir={in_repository(run_dir)}", *plan.pretrain_overrides]
    prepare = window.run(window.step("prepare", [python, SCRIPT, "prepare", CONFIG, *overrides], plan.prepare_by))
    window.finish(cuda_tests)
    try:
        window.summary["cuda_tests"] = cuda_test_counts(junit)
    except (OSError, ElementTree.ParseError, AttributeError) as error:
        window.summary["cuda_tests"] = {"error": f"no junit report: {error}"}
    shutil.copyfile(cuda_tests.log, out / "cuda-tests.log")

    budget = plan.time_budget(window.elapsed())
    train = [python, "-m", "workbench.train", CONFIG, overrides[0], f"training.time_budget_s={budget}", *overrides[1:]]
    pretrain = window.step("pretrain", train, plan.pretrain_kill)
    if prepare.status != "ok":
        window.skip(pretrain, "the corpus was not prepared")
    elif budget is None:
        window.skip(pretrain, f"less than {plan.shortest_budget:g} s left for training")
    else:
        window.summary["time_budget_s"] = budget
        window.run(pretrain)
    try:
        metrics = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
        window.summary["pretrain"] = pretraining_figures(metrics)
        shutil.copyfile(run_dir / "metrics.json", window.steps_dir / "pretrain-metrics.json")
        window.say(f"pretrain: {json.dumps(window.summary['pretrain'])}")
    except (OSError, ValueError, KeyError, IndexError, ZeroDivisionError) as error:
        window.summary["pretrain"] = {"error": f"no figures: {type(error).__name__}: {error}"}
    window.checkpoint()

    hardware = window.summary.get("environment", {}).get("device_name")
    shown = "python " + shlex.join(pretrain.argv[1:])
    publish_argv = [python, "scripts/publish_encoder.py", run_dir, model_dir, "--command", shown]
    publish = window.step("publish", [*publish_argv, *(["--hardware", hardware] if hardware else [])], plan.publish_by)
    if pretrain.status != "ok":
        window.skip(publish, "no pre-trained run")
    else:
        window.run(publish)
    if publish.status == "ok":
        files = {path.name: path.stat().st_size for path in sorted(model_dir.iterdir())}
        window.summary["model"] = {"files": files, "bytes": sum(files.values())}
        window.summary["model"]["packed"] = pack_folder(model_dir, out, MODEL_NAME)
        window.say(f"publish: {len(files)} files, {sum(files.values()):,} bytes, packed into {out}")
        window.checkpoint()

    evidence = window.step(
        "evidence",
        [
            *(python, "scripts/encoder_evidence.py", "--qbqtc", data / "qbqtc" / "dev.json"),
            *("--encoder", f"{MODEL_NAME}={in_repository(model_dir)}", "--encoder", "scratch=scratch"),
            *("--scratch-vocab", data / "vocab" / "bert-base-chinese-vocab.txt", "--output-dir", evidence_dir),
            *plan.evidence_arguments,
        ],
        plan.evidence_by,
    )
    if publish.status != "ok":
        window.skip(evidence, "no published encoder")
    else:
        window.run(evidence)
    if (evidence_dir / "runs.csv").is_file():
        with (evidence_dir / "runs.csv").open(encoding="utf-8") as rows:
            window.summary["evidence"] = [
                {key: number(value) for key, value in row.items()} for row in csv.DictReader(rows)
            ]
        for name in ("runs.csv", "summary.md"):
            shutil.copyfile(evidence_dir / name, window.steps_dir / f"evidence-{name}")


def environment() -> dict[str, Any]:
    """Python, the packages the window uses, the accelerator."""
    import importlib.metadata
    import platform

    import torch

    packages = ("torch", "transformers", "accelerate", "tokenizers", "huggingface_hub", "datasets", "safetensors")
    versions = {}
    for name in (*packages, "numpy", "pyarrow", "pandas", "scikit-learn", "pytest"):
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    import jieba  # the kit unpacks its source folder, which has no package metadata

    versions["jieba"] = jieba.__version__
    found = {
        "python": platform.python_version(),
        "executable": sys.executable,
        "cpu_count": os.cpu_count(),
        "packages": versions,
        "torch_cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "device_name": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "bf16_supported": torch.cuda.is_available() and torch.cuda.is_bf16_supported(),
    }
    if shutil.which("nvidia-smi"):
        query = "--query-gpu=name,memory.total,driver_version,clocks.max.sm"
        smi = subprocess.run(["nvidia-smi", query, "--format=csv,noheader"], capture_output=True, text=True)
        found["nvidia_smi"] = smi.stdout.strip() or smi.stderr.strip()
    import workbench.train  # noqa: F401  the package and its imports load (datasets, jieba from the kit)

    return found


def prepare(config_path: str, overrides: list[str]) -> dict[str, Any]:
    """Encode and cache the corpus of the pretrain config (``prepare_corpus``'s cache): the run then finds it."""
    from workbench.config import load_config
    from workbench.train.pretraining import prepare_pretraining

    return prepare_pretraining(load_config(config_path, overrides)).metrics()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="the whole window")
    run.add_argument("--out", type=Path, required=True, help="the folder that comes back ($OUT)")
    run.add_argument("--work-dir", type=Path, default=Path("outputs/gpu-window"), help="a new folder for the runs")
    run.add_argument("--micro", action="store_true", help="micro scale on a CPU (a dry run)")
    commands.add_parser("environment", help="versions and the GPU, one JSON line")
    prepared = commands.add_parser("prepare", help="encode and cache a pretrain config's corpus")
    prepared.add_argument("config")
    prepared.add_argument("overrides", nargs="*")
    unpacked = commands.add_parser("unpack", help="the published folder from the returned pieces")
    unpacked.add_argument("files_at", type=Path, help="the folder the device tool's files came back into")
    unpacked.add_argument("target", type=Path, help="a new folder, e.g. models/workbench-zh-mini")
    arguments = parser.parse_args(argv)
    if arguments.command == "environment":
        print(json.dumps(environment()))
    elif arguments.command == "prepare":
        print(json.dumps(prepare(arguments.config, arguments.overrides)))
    elif arguments.command == "unpack":
        try:
            files = unpack(arguments.files_at, arguments.target)
        except (OSError, ValueError) as error:
            parser.error(str(error))
        print(f"{arguments.target}: {', '.join(files)}")
    else:
        work = arguments.work_dir if arguments.work_dir.is_absolute() else ROOT / arguments.work_dir
        if work.exists() and any(work.iterdir()):
            parser.error(f"--work-dir: {str(work)!r} already holds files; choose a new folder")
        if not os.environ.get("WORKBENCH_DATA"):
            parser.error("WORKBENCH_DATA: must name the data root (gpu_run.sh points it at the kit's KIT_DATA)")
        arguments.out.mkdir(parents=True, exist_ok=True)
        start = float(os.environ.get("GPU_RUN_T0") or time.time())
        summary = run_window(arguments.out.resolve(), work, MICRO if arguments.micro else GPU, arguments.micro, start)
        return 0 if all(step["status"] == "ok" for step in summary["steps"].values()) else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
