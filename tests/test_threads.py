"""torch's CPU thread count is chosen deliberately (workbench.threads, training.threads, the runner's
kernels), and the busy-machine benchmark's parts work."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import torch
from transformers import TrainerCallback

from benchmarks.threads import DEFAULT, busy_core, parse_threads, ratio_rows
from workbench.config import load_config
from workbench.threads import THREAD_VARIABLES, default_threads, kernel_environment, torch_threads


def test_default_threads_is_omp_num_threads_when_set_else_half_the_cores(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert default_threads() == 3
    monkeypatch.delenv("OMP_NUM_THREADS")
    for cores, expected in ((1, 1), (2, 1), (3, 1), (8, 4), (None, 1)):  # the usable cores (CPU affinity)
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid, cores=cores: set(range(cores or 0)), raising=False)
        monkeypatch.setattr(os, "cpu_count", lambda cores=cores: cores)
        assert default_threads() == expected
    monkeypatch.setenv("OMP_NUM_THREADS", "0")  # not a usable setting: ignored
    assert default_threads() == 1


def test_torch_threads_sets_and_restores():
    before = torch.get_num_threads()
    with torch_threads(1) as used:
        assert used == 1 and torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match=r"^threads:"):
        with torch_threads(0):
            pass
    assert torch.get_num_threads() == before


def test_kernel_environment_names_every_thread_variable():
    environment = kernel_environment(2)
    assert {name: environment[name] for name in THREAD_VARIABLES} == dict.fromkeys(THREAD_VARIABLES, "2")


def test_training_threads_is_validated():
    assert load_config({"training": {"threads": 2}}).training.threads == 2
    assert load_config({}).training.threads is None
    with pytest.raises(ValueError, match=r"^training.threads:"):
        load_config({"training": {"threads": 0}})


class _Threads(TrainerCallback):
    def __init__(self) -> None:
        self.seen: set[int] = set()

    def on_step_begin(self, args, state, control, **kwargs):
        self.seen.add(torch.get_num_threads())


@pytest.mark.slow
@pytest.mark.parametrize("threads", [1, 2])
def test_finetune_trains_with_training_threads_and_restores_the_setting(tmp_path, threads):
    from workbench.train import finetune

    before = torch.get_num_threads()
    recorder = _Threads()
    finetune(
        {
            "output_dir": str(tmp_path / "run"),
            "data": {"source": "sample_relevance", "max_train_samples": 32, "max_eval_samples": 16, "max_length": 16},
            "model": {"tiny": {"num_layers": 1, "hidden_size": 16, "num_heads": 2}},
            "training": {"num_train_epochs": 1, "per_device_train_batch_size": 16, "quiet": True, "threads": threads},
        },
        callbacks=[recorder],
    )
    assert recorder.seen == {threads}
    assert torch.get_num_threads() == before


# ----------------------------------------------------------------------------- the benchmark's parts


def test_parse_threads():
    assert parse_threads("default, 1,2") == [DEFAULT, "1", "2"]
    for bad in ("", "0", "one", "1,1"):
        with pytest.raises(ValueError, match="--threads"):
            parse_threads(bad)


def test_ratio_rows_are_busy_over_idle_medians():
    times = {("default", False): [(10.0, 5.0), (12.0, 6.0), (11.0, 4.0)], ("default", True): [(13.0, 6.0)] * 3}
    (row,) = ratio_rows(times, ["default"])
    assert row["wall_idle"] == 11.0 and row["train_idle"] == 5.0
    assert row["wall_ratio"] == pytest.approx(13 / 11) and row["train_ratio"] == pytest.approx(6 / 5)


def test_busy_core_spins_one_process_and_stops_it():
    psutil = pytest.importorskip("psutil")
    with busy_core() as pid:
        process = psutil.Process(pid)
        start, deadline = process.cpu_times().user, time.monotonic() + 60
        while process.cpu_times().user <= start and time.monotonic() < deadline:  # no timing: a loaded machine is slow
            time.sleep(0.05)
        assert process.cpu_times().user > start  # it computes
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_the_benchmark_runs_the_example_config():
    from benchmarks.threads import DEFAULT_CONFIG

    assert (Path(__file__).resolve().parents[1] / DEFAULT_CONFIG).is_file()
