"""Loss benchmark: forward+backward time of every loss relative to ``F.cross_entropy``.

    python -m workbench.bench losses [--device cpu|cuda] [--repeats N] [--threads T]

Inputs: sentence level (4096 x 3) and token level (32 x 128 x 9, 10% of positions -100).
Each repeat times a block of ``BLOCK`` forward+backward calls of the loss and of
``F.cross_entropy`` back to back (interleaved, same process), and the table reports the
median over repeats of loss time / CE time. On CPU the clock is the thread's CPU time
(``time.thread_time``; with one torch thread all work runs on it), so time the process
spends descheduled on a shared machine does not count; on CUDA it is wall time with
synchronisation. When MONAI is installed, its DiceLoss / TverskyLoss / FocalLoss are
configured to compute the same value as ours (asserted before timing) and timed the
same way against ours.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from workbench.losses import build_loss

SHAPES = {"sentence 4096x3": (4096, None, 3), "token 32x128x9": (32, 128, 9)}
WARMUP = 3
BLOCK = 5
def loss_configs(num_classes: int) -> list[tuple[str, str, dict]]:
    counts = [1000 * (k + 1) for k in range(num_classes)]
    return [
        ("ce", "ce", {}),
        ("wce", "wce", {"label_counts": counts}),
        ("ls", "ls", {}),
        ("focal", "focal", {}),
        ("pcl reference", "pcl", {"label_counts": counts, "variant": "reference"}),
        ("pcl weighted", "pcl", {"label_counts": counts, "variant": "weighted"}),
        ("pcl expected_cost", "pcl", {"label_counts": counts, "variant": "expected_cost"}),
        ("pcl batch", "pcl", {"counts": "batch", "variant": "weighted"}),
        ("dice", "dice", {}),
        ("dice set-level", "dice", {"set_level": True}),
        ("tversky set-level", "tversky", {"alpha": 0.7, "beta": 0.3, "set_level": True}),
        ("dsc paper", "dsc", {"preset": "paper"}),
        ("dsc reference", "dsc", {"preset": "reference"}),
        ("dsc ohem", "dsc", {"preset": "reference", "ohem_ratio": 1.0}),
    ]


def make_inputs(shape: tuple, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    batch, length, num_classes = shape
    logit_shape = (batch, num_classes) if length is None else (batch, length, num_classes)
    logits = torch.randn(logit_shape, generator=generator)
    labels = torch.randint(0, num_classes, logit_shape[:-1], generator=generator)
    if length is not None:
        labels[torch.rand(labels.shape, generator=generator) < 0.1] = -100
    return logits.to(device), labels.to(device)


def clock(device: str) -> Callable[[], float]:
    """Thread CPU time on CPU (robust to a loaded machine), synchronised wall time on CUDA."""
    if device == "cpu":
        return time.thread_time

    def synchronised() -> float:
        torch.cuda.synchronize()
        return time.perf_counter()

    return synchronised


def time_block(loss_fn: Callable, logits: torch.Tensor, labels: torch.Tensor, now: Callable[[], float]) -> float:
    """Seconds per call of loss_fn(leaf, labels).backward(), averaged over BLOCK calls."""
    start = now()
    for _ in range(BLOCK):
        loss_fn(logits.detach().requires_grad_(True), labels).backward()
    return (now() - start) / BLOCK


def interleaved_ratio(
    loss_fn: Callable, baseline_fn: Callable, logits: torch.Tensor, labels: torch.Tensor, repeats: int
) -> tuple[float, float]:
    """(median seconds of loss_fn, median of loss_fn time / baseline_fn time), timed alternately."""
    now = clock(logits.device.type)
    for _ in range(WARMUP):
        time_block(loss_fn, logits, labels, now)
        time_block(baseline_fn, logits, labels, now)
    seconds, ratios = [], []
    for _ in range(repeats):
        ours = time_block(loss_fn, logits, labels, now)
        theirs = time_block(baseline_fn, logits, labels, now)
        seconds.append(ours)
        ratios.append(ours / theirs)
    return statistics.median(seconds), statistics.median(ratios)


def torch_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def monai_equivalents(num_classes: int) -> list[tuple[str, Callable, Callable]]:
    """(name, ours, MONAI's) pairs computing the same value on labels without -100, or [] without MONAI.

    MONAI's FocalLoss(use_softmax=True) takes the mean of -(1 - p_c)^gamma log p_c y_c
    over all N x C one-hot entries, i.e. our per-sample mean divided by C, so its value is
    multiplied by C.
    """
    try:
        from monai.losses import DiceLoss, FocalLoss, TverskyLoss
    except ImportError:
        return []

    def channels_first(function, scale: float = 1.0):
        def call(logits, labels):
            if logits.dim() == 2:
                value = function(logits.unsqueeze(-1), labels.unsqueeze(-1).unsqueeze(1))
            else:
                value = function(logits.transpose(1, 2), labels.unsqueeze(1))
            return value * scale if scale != 1.0 else value
        return call

    return [
        ("dice set-level", build_loss("dice", set_level=True),
         channels_first(DiceLoss(softmax=True, to_onehot_y=True, squared_pred=True, batch=True, smooth_nr=1.0, smooth_dr=1.0))),
        ("tversky set-level", build_loss("tversky", alpha=0.7, beta=0.3, set_level=True),
         channels_first(TverskyLoss(softmax=True, to_onehot_y=True, alpha=0.7, beta=0.3, batch=True, smooth_nr=1.0, smooth_dr=1.0))),
        ("focal", build_loss("focal", gamma=2.0),
         channels_first(FocalLoss(gamma=2.0, to_onehot_y=True, use_softmax=True), scale=float(num_classes))),
    ]


def run_device(device: str, repeats: int) -> None:
    print(f"\n### device={device}, threads={torch.get_num_threads()}, repeats={repeats} x {BLOCK} calls (median)\n")
    print("| loss | " + " | ".join(f"{shape} ms | x CE" for shape in SHAPES) + " |")
    print("|---|" + "---|---|" * len(SHAPES))
    inputs = {shape: make_inputs(dims, device) for shape, dims in SHAPES.items()}
    names = [label for label, _, _ in loss_configs(3)]
    for index, label in enumerate(["F.cross_entropy", *names]):
        cells = []
        for shape, (logits, labels) in inputs.items():
            if index == 0:
                loss = torch_cross_entropy
            else:
                _, name, params = loss_configs(logits.shape[-1])[index - 1]
                loss = build_loss(name, **params).to(device)
            seconds, ratio = interleaved_ratio(loss, torch_cross_entropy, logits, labels, repeats)
            cells.append(f"{seconds * 1e3:.3f} | {ratio:.2f}")
        print(f"| {label} | " + " | ".join(cells) + " |", flush=True)
    rows = {}
    for shape, (logits, labels) in inputs.items():
        clean = labels.clamp(min=0)
        for name, ours, theirs in monai_equivalents(logits.shape[-1]):
            difference = (ours(logits, clean) - theirs(logits, clean)).abs().item()
            if difference > 1e-5:
                raise AssertionError(f"MONAI {name} on {shape} is not equivalent: |value diff| = {difference:.2e}")
            _, ratio = interleaved_ratio(ours, theirs, logits, clean, repeats)
            rows.setdefault(name, []).append(f"{ratio:.2f} | {difference:.1e}")
    if not rows:
        print("\nMONAI not installed: comparison skipped (pip install '.[monai]').")
        return
    print("\n| vs MONAI (ours / MONAI time, |value diff|) | " + " | ".join(f"{s} ratio | diff" for s in SHAPES) + " |")
    print("|---|" + "---|---|" * len(SHAPES))
    for name, cells in rows.items():
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m workbench.bench losses", description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default=None, help="default: cpu, and cuda when present")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads for CPU runs")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda requested but CUDA is not available")
    torch.set_num_threads(args.threads)
    devices = [args.device] if args.device else ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        run_device(device, args.repeats)
