"""Loss benchmark: forward+backward time of every loss relative to ``F.cross_entropy``.

    python -m benchmarks losses [--device cpu|cuda] [--sizes LIST|all] [--repeats N]
                                     [--threads T] [--losses LIST]

Informational: the loss-speed targets are withdrawn (the loss on (N, C) logits is far below 1% of a
transformer step; benchmarks/train.py measures what counts, a whole fine-tune step).

Sizes ``NxC`` are sentence level (every label valid), ``NxTxC`` token level (10% of the
positions -100); the default is 4096x3 and 32x128x9, ``all`` adds 65536x3 and 64x512x9.
Each repeat times a block of ``BLOCK`` forward+backward calls of the loss and then of
``F.cross_entropy`` on the same inputs (interleaved, same process); the table reports
the median over repeats of the loss's time per call and of the ratio loss / CE. On CPU the
clock is the thread's CPU time (``time.thread_time``; with one torch thread all work runs
on it), so time the process
spends descheduled on a shared machine does not count; on CUDA it is the time between
two CUDA events around the block (the block's wall time when, as here, the GPU waits for
kernel launches). When MONAI is installed, its DiceLoss / TverskyLoss / FocalLoss are
configured to compute the same value as ours (asserted before timing) and timed the same
way against ours.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from workbench.losses import build_loss

STANDARD_SIZES = ("4096x3", "32x128x9")
LARGE_SIZES = ("65536x3", "64x512x9")
WARMUP = 3
BLOCK = 5


def loss_configs(num_classes: int) -> list[tuple[str, str, dict]]:
    """(row label, registry name, parameters) of every benchmarked loss for C classes."""
    counts = [1000 * (k + 1) for k in range(num_classes)]
    return [
        ("ce", "ce", {}),
        ("wce", "wce", {"label_counts": counts}),
        ("ls", "ls", {}),
        ("focal", "focal", {}),
        ("pcl reference", "pcl", {"label_counts": counts, "variant": "reference"}),
        ("pcl paper", "pcl", {"label_counts": counts, "variant": "paper"}),
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


def parse_size(text: str) -> tuple[int, int | None, int]:
    """ "NxC" -> (N, None, C); "NxTxC" -> (N, T, C)."""
    try:
        parts = [int(part) for part in text.lower().split("x")]
    except ValueError:
        parts = []
    if len(parts) == 2 and min(parts) >= 1 and parts[1] >= 2:
        return parts[0], None, parts[1]
    if len(parts) == 3 and min(parts) >= 1 and parts[2] >= 2:
        return parts[0], parts[1], parts[2]
    raise ValueError(f"size: must be NxC or NxTxC with C >= 2, got {text!r}")


def size_label(dims: tuple[int, int | None, int]) -> str:
    batch, length, num_classes = dims
    return f"{batch}x{num_classes}" if length is None else f"{batch}x{length}x{num_classes}"


def make_inputs(dims: tuple[int, int | None, int], device: str) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    batch, length, num_classes = dims
    logit_shape = (batch, num_classes) if length is None else (batch, length, num_classes)
    logits = torch.randn(logit_shape, generator=generator)
    labels = torch.randint(0, num_classes, logit_shape[:-1], generator=generator)
    if length is not None:
        labels[torch.rand(labels.shape, generator=generator) < 0.1] = -100
    return logits.to(device), labels.to(device)


def time_block(loss_fn: Callable, logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Seconds per call of loss_fn(leaf, labels).backward(), averaged over BLOCK calls."""
    if logits.device.type == "cpu":
        start = time.thread_time()
        for _ in range(BLOCK):
            loss_fn(logits.detach().requires_grad_(True), labels).backward()
        return (time.thread_time() - start) / BLOCK
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(BLOCK):
        loss_fn(logits.detach().requires_grad_(True), labels).backward()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / BLOCK


def interleaved_ratio(
    loss_fn: Callable, baseline_fn: Callable, logits: torch.Tensor, labels: torch.Tensor, repeats: int
) -> tuple[float, float]:
    """(median seconds of loss_fn, median of loss_fn time / baseline_fn time), timed alternately."""
    for _ in range(WARMUP):
        time_block(loss_fn, logits, labels)
        time_block(baseline_fn, logits, labels)
    seconds, ratios = [], []
    for _ in range(repeats):
        ours = time_block(loss_fn, logits, labels)
        theirs = time_block(baseline_fn, logits, labels)
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

    smoothing = {"batch": True, "smooth_nr": 1.0, "smooth_dr": 1.0}  # set level, our gamma = 1
    monai_dice = DiceLoss(softmax=True, to_onehot_y=True, squared_pred=True, **smoothing)
    monai_tversky = TverskyLoss(softmax=True, to_onehot_y=True, alpha=0.7, beta=0.3, **smoothing)
    monai_focal = FocalLoss(gamma=2.0, to_onehot_y=True, use_softmax=True)
    return [
        ("dice set-level", build_loss("dice", set_level=True), channels_first(monai_dice)),
        (
            "tversky set-level",
            build_loss("tversky", alpha=0.7, beta=0.3, set_level=True),
            channels_first(monai_tversky),
        ),
        ("focal", build_loss("focal", gamma=2.0), channels_first(monai_focal, scale=float(num_classes))),
    ]


def hardware(device: str) -> str:
    """One line naming the machine the figures come from."""
    if device == "cuda":
        name = torch.cuda.get_device_name()
    else:
        name = platform.processor() or platform.machine()
        try:
            with open("/proc/cpuinfo") as cpuinfo:
                name = next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
        except (OSError, StopIteration):
            pass
    try:
        import monai

        extra = f", MONAI {monai.__version__}"
    except ImportError:
        extra = ", MONAI not installed"
    return f"{name}; torch {torch.__version__}{extra}; {datetime.date.today().isoformat()}"


def run_device(device: str, sizes: list[tuple[int, int | None, int]], repeats: int, losses: list[str] | None) -> None:
    labels_text = [size_label(dims) for dims in sizes]
    print(
        f"\n### device={device} ({hardware(device)}), threads={torch.get_num_threads()}, "
        f"median of {repeats} repeats x {BLOCK} calls\n"
    )
    header = " | ".join(f"{text} ms | x CE" for text in labels_text)
    print(f"| loss | {header} |")
    print("|---|" + "---|---|" * len(sizes))
    inputs = [make_inputs(dims, device) for dims in sizes]
    rows = [("F.cross_entropy", None, None)] + [(label, name, params) for label, name, params in loss_configs(3)]
    for index, (label, _, _) in enumerate(rows):
        if index > 0 and losses is not None and label not in losses:
            continue
        cells = []
        for logits, labels in inputs:
            if index == 0:
                loss = torch_cross_entropy
            else:
                _, name, params = loss_configs(logits.shape[-1])[index - 1]
                loss = build_loss(name, **params)
            if not torch.isfinite(loss(logits, labels)).all():
                raise AssertionError(f"{label}: non-finite value on {tuple(logits.shape)}")
            seconds, ratio = interleaved_ratio(loss, torch_cross_entropy, logits, labels, repeats)
            cells.append(f"{seconds * 1e3:.3f} | {ratio:.2f}")
        print(f"| {label} | " + " | ".join(cells) + " |", flush=True)
    monai_rows = {}
    for logits, labels in inputs:
        clean = labels.clamp(min=0)
        for name, ours, theirs in monai_equivalents(logits.shape[-1]):
            if losses is not None and name not in losses:
                continue
            ours = ours.to(device)
            reference = theirs(logits, clean).item()
            difference = abs(ours(logits, clean).item() - reference)
            if difference > 1e-5 * max(1.0, abs(reference)):
                raise AssertionError(
                    f"MONAI {name} on {tuple(logits.shape)} is not equivalent: |value diff| = {difference:.2e}"
                )
            _, ratio = interleaved_ratio(ours, theirs, logits, clean, repeats)
            monai_rows.setdefault(name, []).append(f"{ratio:.2f} | {difference:.1e}")
    if not monai_rows:
        if losses is None:
            print("\nMONAI not installed: comparison skipped (pip install '.[monai]').")
        return
    print(
        "\n| vs MONAI (ours / MONAI time, labels without -100) | "
        + " | ".join(f"{text} ratio | value diff" for text in labels_text)
        + " |"
    )
    print("|---|" + "---|---|" * len(sizes))
    for name, cells in monai_rows.items():
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks losses", description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument(
        "--sizes",
        default=",".join(STANDARD_SIZES),
        help=f"comma-separated NxC / NxTxC, or 'all' ({', '.join(STANDARD_SIZES + LARGE_SIZES)})",
    )
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (the CPU clock assumes 1)")
    parser.add_argument("--losses", default=None, help="comma-separated row labels to run (default: all)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda requested but CUDA is not available")
    try:
        texts = STANDARD_SIZES + LARGE_SIZES if args.sizes == "all" else tuple(args.sizes.split(","))
        sizes = [parse_size(text) for text in texts]
    except ValueError as error:
        parser.error(str(error))
    known = {label for label, _, _ in loss_configs(3)}
    losses = None if args.losses is None else [label.strip() for label in args.losses.split(",")]
    if losses is not None and set(losses) - known:
        parser.error(f"--losses: unknown {sorted(set(losses) - known)}; known: {sorted(known)}")
    torch.set_num_threads(args.threads)
    run_device(args.device, sizes, args.repeats, losses)
