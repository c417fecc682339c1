"""The losses on a GPU: the same values and gradients as on the CPU.

With CUDA, every registered loss (every pcl variant and counts mode, the dsc presets, OHEM) runs forward
and backward on ``(N, C)`` and ``(N, T, C)`` inputs with and without -100 labels and matches the CPU, and
fp16 / bf16 logits give finite values in their dtype. Without CUDA those tests are skipped. The MLM
objectives (``losses.mlm``) are also checked for host synchronisation, on CPU stand-ins and on CUDA.

    python -m pytest -q tests/test_losses_cuda.py -p no:cacheprovider
"""

from __future__ import annotations

import pytest
import torch

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
    *[
        ("pcl", {"variant": variant, "counts": "batch"}, 3)
        for variant in ("reference", "paper", "weighted", "expected_cost")
    ],
    ("pcl", {"variant": "expected_cost", "counts": "batch", "cost_matrix": COST}, 3),
    ("pcl", {"variant": "paper", "label_counts": [30, 50, 20], "cost_matrix": COST}, 3),
    ("class_balanced", {"label_counts": [30, 50, 20], "beta": 0.99}, 3),
    ("logit_adjusted", {"label_counts": [30, 50, 20], "tau": 1.0}, 3),
    # CORN reads K - 1 logits: 3 logit columns are a 4-class task whose labels here are 0-2
    ("corn", {}, 3),
]
CASE_IDS = [
    f"{name}-C{c}-" + "-".join(f"{k}={v}" for k, v in params.items() if k != "cost_matrix") for name, params, c in CASES
]
SHAPES = {"rows": (12,), "tokens": (3, 5)}


def reductions(name: str, params: dict) -> list[str]:
    """The reductions a case accepts ("none" is refused for batch-level dice losses; CORN takes "mean" only)."""
    if name == "corn":
        return ["mean"]
    batch_level = params.get("set_level") or params.get("ohem_ratio") or params.get("preset") == "reference"
    return ["mean", "sum"] if name in ("dice", "tversky", "dsc") and batch_level else ["mean", "sum", "none"]


def make_inputs(
    shape: tuple[int, ...], num_classes: int, ignored: str, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(*shape, num_classes, generator=generator, dtype=torch.float64) * 2
    labels = torch.randint(0, num_classes, shape, generator=generator)
    if ignored == "some":
        labels.view(-1)[::4] = -100
    elif ignored == "all":
        labels.fill_(-100)
    return logits, labels


def value_and_grad(
    loss: torch.nn.Module, logits: torch.Tensor, labels: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
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
    from workbench.synonyms import synonym_matcher
    from workbench.vocab import load_tokenizer

    if name == "mlm_hc":
        return build_loss(name, matcher=synonym_matcher(load_tokenizer()), **params)
    return build_loss(name, **params)


# ----------------------------------------------------------------------------- CUDA

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA (run on the GPU machine)")


@cuda
@pytest.mark.parametrize(("name", "params", "num_classes"), CASES, ids=CASE_IDS)
@pytest.mark.parametrize("shape", list(SHAPES), ids=list(SHAPES))
@pytest.mark.parametrize("ignored", ["none", "some", "all"])
def test_cuda_matches_the_cpu(name, params, num_classes, shape, ignored):
    logits, labels = make_inputs(SHAPES[shape], num_classes, ignored)
    for reduction in reductions(name, params):
        expected = value_and_grad(build_loss(name, reduction=reduction, **params), logits, labels)
        for module_device in ("cpu", "cuda"):  # per-class constants follow the logits, moved or not
            loss = build_loss(name, reduction=reduction, **params).to(module_device)
            for dtype in (torch.float32, torch.float64):
                value, grad = value_and_grad(loss, logits.to("cuda", dtype), labels.to("cuda"))
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
        value, grad = value_and_grad(loss, logits.to("cuda", dtype), labels.to("cuda"))
        assert value.dtype == dtype and grad.dtype == dtype
        assert torch.isfinite(value).all() and torch.isfinite(grad).all()


@cuda
def test_cuda_bad_label_raises_a_value_error_naming_labels():
    with pytest.raises(ValueError, match=r"^labels:"):
        build_loss("dice")(torch.randn(4, 3, device="cuda"), torch.tensor([0, 1, 3, -100], device="cuda"))


@cuda
@pytest.mark.parametrize("shape", list(SHAPES), ids=list(SHAPES))
@pytest.mark.parametrize("ignored", ["none", "some", "all"])
def test_cuda_a_loss_of_yours_matches_the_cpu(shape, ignored):
    # issue 38: a registered loss of the user's (examples/poly1.py) through the adapter, on the GPU and in bf16
    from pathlib import Path

    from workbench.losses import import_loss_modules, registry_restored

    with registry_restored():
        import_loss_modules([Path(__file__).resolve().parents[1] / "examples" / "poly1.py"])
        logits, labels = make_inputs(SHAPES[shape], 3, ignored)
        expected = value_and_grad(build_loss("poly1", epsilon=1.0), logits, labels)
        loss = build_loss("poly1", epsilon=1.0).to("cuda")
        for dtype in (torch.float32, torch.float64):
            value, grad = value_and_grad(loss, logits.to("cuda", dtype), labels.to("cuda"))
            tolerance = {"rtol": 1e-4, "atol": 1e-5} if dtype == torch.float32 else {}
            torch.testing.assert_close(value.cpu().double(), expected[0], **tolerance)
            torch.testing.assert_close(grad.cpu().double(), expected[1], **tolerance)
        value, grad = value_and_grad(loss, logits.to("cuda", torch.bfloat16), labels.to("cuda"))
        assert value.dtype == grad.dtype == torch.bfloat16 and torch.isfinite(grad).all()
