"""The GPU window's parts that run on a CPU (scripts/gpu_window.py, issue 33): the time plan, the time budget's
stop, the throughput figures, the steps' deadlines, and what comes back within the device tool's limits."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from workbench.train.trainer import TimeBudget

ROOT = Path(__file__).resolve().parents[1]
MiB = 2**20


def _window_module():
    spec = importlib.util.spec_from_file_location("gpu_window", ROOT / "scripts" / "gpu_window.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


window = _window_module()


@pytest.mark.parametrize("plan", [window.GPU, window.MICRO], ids=["gpu", "micro"])
def test_the_plan_ends_each_step_before_the_next_needs_it(plan):
    assert plan.prepare_by < plan.pretrain_by < plan.pretrain_kill < plan.publish_by < plan.evidence_by
    assert plan.cuda_tests_by < plan.pretrain_by


def test_the_gpu_plan_ends_pretraining_by_minute_7_and_the_command_well_inside_10():
    plan = window.GPU
    assert plan.pretrain_by == 7 * 60 and plan.evidence_by <= 9 * 60
    started = 150.0  # the corpus prepared and the CUDA tests done after 2.5 minutes
    budget = plan.time_budget(started)
    assert budget == int(7 * 60 - started - plan.pretrain_reserve)
    assert plan.time_budget(7 * 60 - plan.pretrain_reserve - plan.shortest_budget + 1) is None  # too late to start
    assert window.MICRO.time_budget(0.0) == window.MICRO.longest_budget


def test_the_time_budget_stops_training_once_its_seconds_have_passed():
    state, spent, ample = SimpleNamespace(), TimeBudget(0.0), TimeBudget(3600.0)
    for budget in (spent, ample):
        budget.on_train_begin()
    controls = [SimpleNamespace(should_training_stop=False) for _ in range(2)]
    spent.on_step_end(None, state, controls[0])
    ample.on_step_end(None, state, controls[1])
    assert [control.should_training_stop for control in controls] == [True, False]


def _metrics(**changes):
    metrics = {
        "epochs": [{"epoch": 2.5, "step": 1000, "eval_masked_tokens": 30_000}],
        "tokens_per_epoch": 40_000_000,
        "train_runtime": 200.0,
        "num_parameters": {"total": 10_000_000, "trainable": 10_000_000},
        "perplexity": 50.0,
        "eval_loss": 3.912,
        "blocks": {"train": 300_000, "eval": 1_500},
        "corpus_characters": 37_000_000,
        "share_before_first_step": 0.1,
        "time": 230.0,
    }
    return {**metrics, **changes}


def test_throughput_is_6_n_t_over_the_training_time_as_a_share_of_the_bf16_peak():
    figures = window.pretraining_figures(_metrics())
    tokens = 2.5 * 40_000_000  # the epochs run (fractional when the budget stopped it) x the tokens of one
    assert figures["tokens"] == tokens and figures["tokens_per_second"] == tokens / 200.0
    tflops = 6 * 10_000_000 * tokens / 200.0 / 1e12  # 30 TFLOP/s
    assert figures["tflops_per_second"] == pytest.approx(tflops)
    assert figures["share_of_peak"] == pytest.approx(tflops / 790.0)
    assert (figures["steps"], figures["perplexity"]) == (1000, 50.0)


def test_the_cuda_test_counts_come_from_the_junit_report(tmp_path):
    report = tmp_path / "report.xml"
    report.write_text(
        '<?xml version="1.0"?><testsuites>'
        '<testsuite name="pytest" errors="1" failures="2" skipped="170" tests="181" time="61.5"></testsuite>'
        "</testsuites>",
        encoding="utf-8",
    )
    assert window.cuda_test_counts(report) == {
        **{"tests": 181, "failures": 2, "errors": 1, "skipped": 170, "passed": 8},
        "seconds": 61.5,
    }


def _model_folder(folder: Path) -> dict[str, bytes]:
    """A published folder's size: two float16 shards (15 and 5 MB), the index, config and tokenizer files."""
    contents = {
        "model-00001-of-00002.safetensors": os.urandom(15_629_776),
        "model-00002-of-00002.safetensors": os.urandom(4_919_392),
        "model.safetensors.index.json": b"{}" * 4000,
        "config.json": b"{}",
        "tokenizer.json": os.urandom(300_000),
        "tokenizer_config.json": b"{}",
        "README.md": "模型卡\n".encode(),
    }
    folder.mkdir()
    for name, content in contents.items():
        (folder / name).write_bytes(content)
    return contents


def test_the_published_folder_and_the_logs_come_back_within_the_tool_limits_and_unpack_to_the_same_bytes(tmp_path):
    out, steps = tmp_path / "out", tmp_path / "steps"
    out.mkdir()
    steps.mkdir()
    contents = _model_folder(tmp_path / "model")
    (steps / "pretrain.log").write_text("step 1\n" * 10_000, encoding="utf-8")
    packed = window.pack_folder(tmp_path / "model", out, "workbench-zh-mini")
    assert len(packed["pieces"]) == 2  # 21 MB in pieces of at most 15 MiB
    window.pack_steps(steps, out)
    for name in ("gpu_run.log", "cuda-tests.log"):
        (out / name).write_text("log\n", encoding="utf-8")
    (out / "summary.json").write_text(json.dumps({"model": {"packed": packed}}), encoding="utf-8")
    assert window.returnable_problems(out) == []
    assert all((out / name).stat().st_size <= 15 * MiB for name in packed["pieces"])
    files = window.unpack(out, tmp_path / "models" / "workbench-zh-mini")
    assert files == sorted(contents)
    assert {name: (tmp_path / "models" / "workbench-zh-mini" / name).read_bytes() for name in files} == contents


def test_unpack_refuses_pieces_that_do_not_give_the_tar_and_a_target_that_holds_files(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    _model_folder(tmp_path / "model")
    packed = window.pack_folder(tmp_path / "model", out, "workbench-zh-mini")
    (out / "summary.json").write_text(json.dumps({"model": {"packed": packed}}), encoding="utf-8")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "README.md").write_text("kept\n", encoding="utf-8")
    with pytest.raises(ValueError, match="target: .*already holds files"):
        window.unpack(out, tmp_path / "full")
    assert (tmp_path / "full" / "README.md").read_text(encoding="utf-8") == "kept\n"
    piece = out / packed["pieces"][1]
    content = piece.read_bytes()
    piece.write_bytes(bytes([content[0] ^ 1]) + content[1:])  # one bit of a shard changed
    with pytest.raises(ValueError, match="sha256 differs"):
        window.unpack(out, tmp_path / "new")
    piece.unlink()
    with pytest.raises(ValueError, match=f"files_at: {packed['pieces'][1]} missing"):
        window.unpack(out, tmp_path / "new")


def test_what_would_not_come_back_is_named(tmp_path):
    out = tmp_path / "out"
    (out / "a" / "b" / "c").mkdir(parents=True)
    (out / "a" / "b" / "c" / "deep.txt").write_text("x", encoding="utf-8")
    (out / "bad name.txt").write_text("x", encoding="utf-8")
    (out / "big.bin").write_bytes(b"\0" * (16 * MiB + 1))
    for number in range(6):
        (out / f"file{number}.txt").write_text("x", encoding="utf-8")
    problems = window.returnable_problems(out)
    assert any(problem.startswith("a/b/c/deep.txt: more than 2 folders down") for problem in problems)
    assert any(problem.startswith("bad name.txt: a name of other characters") for problem in problems)
    assert any(problem.startswith("big.bin: 16,777,217 bytes") for problem in problems)
    assert "9 files, over 8" in problems


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended but not yet reaped by its new parent, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_a_step_past_its_deadline_is_stopped_with_the_processes_it_started(tmp_path):
    out, work = tmp_path / "out", tmp_path / "work"
    out.mkdir()
    run = window.Window(out, work, window.MICRO, micro=True, start=time.time())
    child = tmp_path / "child.pid"
    code = (
        "import subprocess, sys, time; "
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        f"open({str(child)!r}, 'w').write(str(p.pid)); "
        "time.sleep(60)"
    )
    step = run.run(run.step("sleeper", [sys.executable, "-c", code], run.elapsed() + 2))
    assert step.status == "timed out" and step.rc is not None
    assert not _running(int(child.read_text()))  # the process the step started went with it
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["steps"]["sleeper"]["status"] == "timed out"
    assert "timed out" in (out / "gpu_run.log").read_text(encoding="utf-8")
    failed = run.run(run.step("failing", [sys.executable, "-c", "raise SystemExit(3)"], run.elapsed() + 30))
    assert (failed.status, failed.rc) == ("failed", 3)
    run.log_file.close()


def test_a_stopped_command_stops_its_steps_and_still_writes_what_was_done(tmp_path, monkeypatch):
    started = []

    def steps(run):
        started.append(run.begin(run.step("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"], 60)))
        os.kill(os.getpid(), signal.SIGTERM)  # as the device tool's timeout would
        time.sleep(5)

    monkeypatch.setattr(window, "steps", steps)
    out = tmp_path / "out"
    out.mkdir()
    summary = window.run_window(out, tmp_path / "work", window.MICRO, micro=True, start=time.time())
    assert summary["steps"]["sleeper"]["status"] == "stopped: SIGTERM"
    assert started[0].process.poll() is not None
    assert json.loads((out / "summary.json").read_text(encoding="utf-8"))["steps"]["sleeper"]["status"].startswith(
        "stopped"
    )
    assert (out / "steps.tar.gz").is_file() and signal.getsignal(signal.SIGTERM) is not window.raise_stopped


def test_run_refuses_a_work_folder_that_holds_files(tmp_path, capsys):
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "kept.txt").write_text("kept\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exit_info:
        window.main(["run", "--out", str(tmp_path / "out"), "--work-dir", str(tmp_path / "work")])
    assert exit_info.value.code == 2 and "error: --work-dir:" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_gpu_run_sh_needs_the_kit_and_out(tmp_path):
    environment = {key: value for key, value in os.environ.items() if key not in ("OUT", "KIT_DATA")}
    result = subprocess.run(
        ["bash", "scripts/gpu_run.sh"], cwd=ROOT, env=environment, capture_output=True, text=True, check=False
    )
    assert result.returncode != 0 and "OUT" in result.stderr
    result = subprocess.run(
        ["bash", "scripts/gpu_run.sh"],
        cwd=ROOT,
        env={**environment, "OUT": str(tmp_path / "out")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0 and "KIT_DATA" in result.stderr and not (tmp_path / "out").exists()
