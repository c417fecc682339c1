"""The losses off the CPU: no host-device synchronisation, the same values as on the CPU.

With CUDA, every registered loss (every pcl variant and counts mode, the dsc presets,
OHEM) runs forward and backward under ``torch.cuda.set_sync_debug_mode("error")``, on
``(N, C)`` and ``(N, T, C)`` inputs with and without -100 labels, and matches the CPU.
Without CUDA those tests are skipped; the same accelerator code path then runs on CPU
tensors (``runs_on_host`` patched to False) under a dispatch mode that fails on every
operation that would synchronise on a GPU: a dry run of the CUDA tests.

    python -m pytest -q tests/test_losses_cuda.py -p no:cacheprovider
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from workbench.losses import available_losses, build_loss

COST = [[0.0, 2.0, 1.0], [1.0, 0.0, 3.0], [2.0, 1.0, 0.0]]
CASES = [
    ("ce", {}, 3),
    ("ce", {"weight": [1.0, 2.0, 0.5]}, 3),
    ("wce", {"label_counts": [30, 50, 20]}, 3),
    ("ls", {"epsilon": 0.2}, 3),
    ("focal", {"gamma": 2.0}, 3),
    ("focal", {"gamma": 0.5, "alpha": [0.2, 0.3, 0.5]}, 3),
    ("focal", {"gamma": 0.0, "alpha": [0.2, 0.3, 0.5]}, 3),
    ("dice", {}, 3),
    ("dice", {"set_level": True, "square": False}, 2),
    ("dice", {"ohem_ratio": 1.5, "class_reduction": "sum"}, 3),
    ("tversky", {"alpha": 0.7, "beta": 0.3}, 3),
    ("tversky", {"set_level": True}, 3),
    ("tversky", {"set_level": True, "ohem_ratio": 1.0}, 2),
    ("dsc", {"preset": "paper"}, 3),
    ("dsc", {"preset": "paper"}, 2),
    ("dsc", {"preset": "reference"}, 3),
    ("dsc", {"preset": "reference"}, 2),
    ("dsc", {"preset": "reference", "ohem_ratio": 1.0}, 3),
    ("dsc", {"preset": "paper", "ohem_ratio": 0.5}, 2),
    *[
        ("pcl", {"variant": variant, "label_counts": [30, 50, 20]}, 3)
        for variant in ("reference", "paper", "weighted", "expected_cost")
    ],
    *[("pcl", {"variant": variant, "counts": "batch"}, 3) for variant in ("reference", "paper", "weighted", "expected_cost")],
    ("pcl", {"variant": "expected_cost", "counts": "batch", "cost_matrix": COST}, 3),
    ("pcl", {"variant": "paper", "label_counts": [30, 50, 20], "cost_matrix": COST}, 3),
]
CASE_IDS = [f"{name}-C{c}-" + "-".join(f"{k}={v}" for k, v in params.items() if k != "cost_matrix") for name, params, c in CASES]
SHAPES = {"rows": (12,), "tokens": (3, 5)}


def reductions(name: str, params: dict) -> list[str]:
    """The reductions a case accepts ("none" is refused for batch-level dice losses)."""
    batch_level = params.get("set_level") or params.get("ohem_ratio") or params.get("preset") == "reference"
    return ["mean", "sum"] if name in ("dice", "tversky", "dsc") and batch_level else ["mean", "sum", "none"]


def make_inputs(shape: tuple[int, ...], num_classes: int, ignored: str, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(*shape, num_classes, generator=generator, dtype=torch.float64) * 2
    labels = torch.randint(0, num_classes, shape, generator=generator)
    if ignored == "some":
        labels.view(-1)[::4] = -100
    elif ignored == "all":
        labels.fill_(-100)
    return logits, labels


def value_and_grad(loss: torch.nn.Module, logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    leaf = logits.detach().requires_grad_(True)
    value = loss(leaf, labels)
    value.sum().backward()
    return value.detach(), leaf.grad


MLM_CASES = [
    ("mlm", {}),
    ("mlm_hc", {"level": "token"}),
    ("mlm_hc", {"level": "word"}),
    ("mlm_sr", {"level": "token", "prediction": "argmax"}),
]
"""The MLM objectives (``losses.mlm``): they gather the masked rows (a boolean gather, a documented host
synchronisation on CUDA, issue 21), so on CUDA they are checked for the CPU's values, not for no sync."""


def test_every_registered_loss_is_covered():
    assert {name for name, _, _ in CASES} | {name for name, _ in MLM_CASES} == set(available_losses())


def mlm_inputs(device: str = "cpu") -> dict[str, torch.Tensor]:
    """A batch of 2 x 8 tokens over the shipped vocabulary: logits, labels (some masked), word spans, embeddings."""
    from workbench.vocab import load_tokenizer

    vocab = len(load_tokenizer())
    generator = torch.Generator().manual_seed(0)
    labels = torch.full((2, 8), -100)
    labels[0, 1:3] = torch.tensor([10, 11])
    labels[1, 4] = 12
    word_ids = torch.tensor([[-1, 0, 0, 1, 2, 2, 3, -1], [-1, 0, 1, 1, 2, 3, 4, -1]])
    return {
        "logits": torch.randn(2, 8, vocab, generator=generator).to(device),
        "labels": labels.to(device),
        "word_ids": word_ids.to(device),
        "embeddings": torch.randn(vocab, 16, generator=generator).to(device),
    }


def mlm_value_and_grad(loss: torch.nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    leaf = batch["logits"].detach().requires_grad_(True)
    value = loss(leaf, batch["labels"], word_ids=batch["word_ids"], embeddings=batch["embeddings"])
    value.backward()
    return value.detach(), leaf.grad


def build_mlm(name: str, params: dict) -> torch.nn.Module:
    from workbench.vocab import load_tokenizer

    return build_loss(name, tokenizer=load_tokenizer(), **params) if name == "mlm_hc" else build_loss(name, **params)


# ----------------------------------------------------------------------------- dry run on CPU

SYNCING_OPS = {
    "_local_scalar_dense",  # .item(), .tolist(), bool(tensor), Python comparisons with tensors
    "nonzero",
    "masked_select",
    "_unique",
    "_unique2",
    "unique_dim",
    "unique_consecutive",
    "equal",
    "is_nonzero",
    "bincount",  # CUDA bincount reads the maximum on the host
    "lift_fresh",  # torch.tensor(Python numbers) inside a forward
    "lift_fresh_copy",
}


class FailOnHostSync(TorchDispatchMode):
    """Raise on any operation that would synchronise the host with a GPU."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.__name__.split(".")[0]
        if name in SYNCING_OPS:
            raise AssertionError(f"host synchronisation: {func}")
        if name in ("index", "index_put", "index_put_") and any(
            isinstance(index, torch.Tensor) and index.dtype == torch.bool for index in args[1]
        ):
            raise AssertionError(f"boolean-mask indexing (a data-dependent shape): {func}")
        return func(*args, **(kwargs or {}))


def use_accelerator_path(patch: pytest.MonkeyPatch) -> None:
    """Make every loss module take its accelerator code path on CPU tensors."""
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("workbench.losses") and hasattr(module, "runs_on_host"):
            patch.setattr(module, "runs_on_host", lambda tensor: False)


@pytest.mark.parametrize(("name", "params", "num_classes"), CASES, ids=CASE_IDS)
@pytest.mark.parametrize("shape", list(SHAPES), ids=list(SHAPES))
@pytest.mark.parametrize("ignored", ["none", "some", "all"])
def test_accelerator_path_on_cpu_matches_and_never_syncs(name, params, num_classes, shape, ignored, monkeypatch):
    logits, labels = make_inputs(SHAPES[shape], num_classes, ignored)
    for reduction in reductions(name, params):
        expected = value_and_grad(build_loss(name, reduction=reduction, **params), logits, labels)
        with monkeypatch.context() as patch:
            use_accelerator_path(patch)
            loss = build_loss(name, reduction=reduction, **params)
            with FailOnHostSync():
                value, grad = value_and_grad(loss, logits, labels)
        torch.testing.assert_close(value, expected[0])
        torch.testing.assert_close(grad, expected[1])
        if ignored == "all":
            assert torch.all(value == 0) and torch.all(grad == 0)


def test_the_sync_detector_catches_host_reads_and_mask_indexing():
    values = torch.arange(6.0)
    for read in (lambda: values.sum().item(), lambda: values[values > 2], lambda: values.nonzero(), lambda: torch.tensor([1.0])):
        with pytest.raises(AssertionError, match="host synchronisation|boolean-mask"), FailOnHostSync():
            read()


def test_validate_asserts_labels_on_the_accelerator_path(monkeypatch):
    use_accelerator_path(monkeypatch)
    logits = torch.randn(4, 3)
    with pytest.raises(RuntimeError, match=r"labels: must lie in \[0, 3\)"):
        build_loss("dice", validate=True)(logits, torch.tensor([0, 1, 3, -100]))
    with pytest.raises(RuntimeError, match=r"labels: must lie in \[0, 3\)"):
        build_loss("ce", validate=True)(logits, torch.tensor([0, -1, 2, 1]))
    build_loss("dice", validate=True)(logits, torch.tensor([0, 1, 2, -100]))  # valid labels pass


def test_the_host_path_checks_labels_without_validate():
    with pytest.raises(ValueError, match=r"labels: must lie in \[0, 3\) or equal -100 \(ignored\), got \[3\]"):
        build_loss("dice")(torch.randn(4, 3), torch.tensor([0, 1, 3, -100]))


# ----------------------------------------------------------------------------- CUDA

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (run on the GPU machine)")


@cuda
@pytest.mark.parametrize(("name", "params", "num_classes"), CASES, ids=CASE_IDS)
@pytest.mark.parametrize("shape", list(SHAPES), ids=list(SHAPES))
@pytest.mark.parametrize("ignored", ["none", "some"])
def test_cuda_forward_and_backward_never_synchronise(name, params, num_classes, shape, ignored):
    logits, labels = make_inputs(SHAPES[shape], num_classes, ignored)
    for reduction in reductions(name, params):
        expected = value_and_grad(build_loss(name, reduction=reduction, **params), logits, labels)
        # Not moved to the GPU: per-class constants are copied (non-blocking) on first use.
        loss = build_loss(name, reduction=reduction, **params)
        for dtype in (torch.float32, torch.float64):
            device_logits, device_labels = logits.to("cuda", dtype), labels.to("cuda")
            torch.cuda.synchronize()
            torch.cuda.set_sync_debug_mode("error")
            try:
                for _ in range(2):  # first call (constants copied) and cached call
                    value, grad = value_and_grad(loss, device_logits, device_labels)
            finally:
                torch.cuda.set_sync_debug_mode("default")
            tolerance = {"rtol": 1e-4, "atol": 1e-5} if dtype == torch.float32 else {}
            torch.testing.assert_close(value.cpu().double(), expected[0], **tolerance)
            torch.testing.assert_close(grad.cpu().double(), expected[1], **tolerance)


@cuda
@pytest.mark.parametrize(("name", "params"), MLM_CASES, ids=[f"{name}-{params}" for name, params in MLM_CASES])
def test_cuda_mlm_objectives_match_the_cpu(name, params):
    loss = build_mlm(name, params)
    expected = mlm_value_and_grad(loss, mlm_inputs())
    value, grad = mlm_value_and_grad(loss, mlm_inputs("cuda"))
    torch.testing.assert_close(value.cpu(), expected[0], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(grad.cpu(), expected[1], rtol=1e-4, atol=1e-5)


@cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_cuda_half_precision_module_on_device(dtype):
    logits, labels = make_inputs((4, 16), 3, "some")
    for name, params, num_classes in CASES:
        if num_classes != 3:
            continue
        loss = build_loss(name, **params).to("cuda")
        device_logits = logits.to("cuda", dtype)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            value, grad = value_and_grad(loss, device_logits, labels.to("cuda"))
        finally:
            torch.cuda.set_sync_debug_mode("default")
        assert value.dtype == dtype and grad.dtype == dtype
        assert torch.isfinite(value).all() and torch.isfinite(grad).all()


@cuda
def test_cuda_validate_stops_on_a_bad_label():
    # A device-side assertion poisons the CUDA context, so it runs in a child process.
    code = (
        "import torch\nfrom workbench.losses import build_loss\n"
        "loss = build_loss('dice', validate=True)\n"
        "value = loss(torch.randn(4, 3, device='cuda'), torch.tensor([0, 1, 3, -100], device='cuda'))\n"
        "torch.cuda.synchronize()\n"
    )
    root = Path(__file__).resolve().parents[1]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=root, env=environment, check=False
    )
    assert result.returncode != 0
    assert "assert" in result.stderr.lower()
