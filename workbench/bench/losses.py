"""Loss benchmark: forward+backward time of every loss relative to ``F.cross_entropy``.

    python -m workbench.bench losses [--device cpu|cuda] [--repeats N] [--threads T]

Inputs: sentence level (4096 x 3) and token level (32 x 128 x 9, 10% of positions -100).
Reports the median of ``repeats`` timed runs after warm-up, as a multiple of CE's median,
and, when MONAI is installed, its DiceLoss / TverskyLoss / FocalLoss configured like ours.
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


def time_forward_backward(loss_fn: Callable, logits: torch.Tensor, labels: torch.Tensor, repeats: int) -> float:
    """Median seconds of loss_fn(logits, labels).backward()."""
    times = []
    for step in range(WARMUP + repeats):
        leaf = logits.detach().requires_grad_(True)
        if logits.is_cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        loss_fn(leaf, labels).backward()
        if logits.is_cuda:
            torch.cuda.synchronize()
        if step >= WARMUP:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def torch_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def monai_equivalents(num_classes: int) -> list[tuple[str, Callable, Callable]]:
    """(name, ours, MONAI's) pairs computing the same value (labels without -100), or [] without MONAI."""
    try:
        from monai.losses import DiceLoss, FocalLoss, TverskyLoss
    except ImportError:
        return []

    def channels_first(function):
        def call(logits, labels):
            if logits.dim() == 2:
                return function(logits.unsqueeze(-1), labels.clamp(min=0).unsqueeze(-1).unsqueeze(1))
            return function(logits.transpose(1, 2), labels.clamp(min=0).unsqueeze(1))
        return call

    return [
        ("dice set-level", build_loss("dice", set_level=True),
         channels_first(DiceLoss(softmax=True, to_onehot_y=True, squared_pred=True, batch=True, smooth_nr=1.0, smooth_dr=1.0))),
        ("tversky set-level", build_loss("tversky", alpha=0.7, beta=0.3, set_level=True),
         channels_first(TverskyLoss(softmax=True, to_onehot_y=True, alpha=0.7, beta=0.3, batch=True, smooth_nr=1.0, smooth_dr=1.0))),
        ("focal", build_loss("focal", gamma=2.0),
         channels_first(FocalLoss(gamma=2.0, to_onehot_y=True, use_softmax=True))),
    ]


def run_device(device: str, repeats: int) -> None:
    print(f"\n### device={device}, threads={torch.get_num_threads()}, repeats={repeats} (median)\n")
    print("| loss | " + " | ".join(f"{shape} ms | x CE" for shape in SHAPES) + " |")
    print("|---|" + "---|---|" * len(SHAPES))
    inputs = {shape: make_inputs(dims, device) for shape, dims in SHAPES.items()}
    baseline = {shape: time_forward_backward(torch_cross_entropy, *inputs[shape], repeats) for shape in SHAPES}
    print("| F.cross_entropy | " + " | ".join(f"{baseline[s] * 1e3:.3f} | 1.00" for s in SHAPES) + " |")
    names = [label for label, _, _ in loss_configs(3)]
    for index, label in enumerate(names):
        cells = []
        for shape, (logits, labels) in inputs.items():
            _, name, params = loss_configs(logits.shape[-1])[index]
            loss = build_loss(name, **params).to(device)
            seconds = time_forward_backward(loss, logits, labels, repeats)
            cells.append(f"{seconds * 1e3:.3f} | {seconds / baseline[shape]:.2f}")
        print(f"| {label} | " + " | ".join(cells) + " |")
    rows = {}
    for shape, (logits, labels) in inputs.items():
        clean = labels.clamp(min=0)
        for name, ours, theirs in monai_equivalents(logits.shape[-1]):
            difference = (ours(logits, clean) - theirs(logits, clean)).abs().item()
            ratio = time_forward_backward(ours, logits, clean, repeats) / time_forward_backward(theirs, logits, clean, repeats)
            rows.setdefault(name, []).append(f"{ratio:.2f} | {difference:.1e}")
    if not rows:
        print("\nMONAI not installed: comparison skipped (pip install '.[monai]').")
        return
    print("\n| vs MONAI (ours / MONAI time, |value diff|) | " + " | ".join(f"{s} ratio | diff" for s in SHAPES) + " |")
    print("|---|" + "---|---|" * len(SHAPES))
    for name, cells in rows.items():
        print(f"| {name} | " + " | ".join(cells) + " |")


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
