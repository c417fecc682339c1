"""The shared loss step: gradient-accumulation scaling through the real Trainer, precision, arguments."""

from __future__ import annotations

import pytest
import torch
from datasets import Dataset
from transformers import BertConfig, BertForSequenceClassification, default_data_collator

from workbench.config import TrainingConfig
from workbench.losses import build_loss
from workbench.train.trainer import (
    LossTrainer,
    count_items,
    resolve_precision,
    scale_for_accumulation,
    training_arguments,
)

NUM_LABELS = 3


def _dataset(n: int, seed: int = 0) -> Dataset:
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(5, 60, (n, 8), generator=generator)
    input_ids[:, 0] = 2
    labels = torch.randint(0, NUM_LABELS, (n,), generator=generator)
    labels[:NUM_LABELS] = torch.arange(NUM_LABELS)  # every class present
    return Dataset.from_dict(
        {
            "input_ids": input_ids.tolist(),
            "attention_mask": torch.ones_like(input_ids).tolist(),
            "labels": labels.tolist(),
        }
    )


def _model() -> BertForSequenceClassification:
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=64,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=16,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        num_labels=NUM_LABELS,
    )
    return BertForSequenceClassification(config)


def _sgd_update(
    loss: torch.nn.Module, dataset: Dataset, batch_size: int, grad_accumulation: int, tmp_path
) -> dict[str, torch.Tensor]:
    """Parameter change after ONE optimizer step of SGD with lr=1 (no clipping, no decay), sequential batches."""
    model = _model()
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    training = TrainingConfig.from_mapping(
        {
            "per_device_train_batch_size": batch_size,
            "gradient_accumulation_steps": grad_accumulation,
            "learning_rate": 1.0,
            "warmup_steps": 0.0,
            "weight_decay": 0.0,
            "max_grad_norm": 0.0,
            "quiet": True,
        }
    )
    args = training_arguments(
        training,
        str(tmp_path),
        evaluate=False,
        optim="sgd",
        lr_scheduler_type="constant",
        max_steps=1,
        save_strategy="no",
        train_sampling_strategy="sequential",
    )
    trainer = LossTrainer(model=model, args=args, train_dataset=dataset, data_collator=default_data_collator, loss=loss)
    trainer.train()
    return {name: p.detach() - before[name] for name, p in model.named_parameters()}


def _assert_same_update(actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    assert any(delta.abs().max() > 1e-4 for delta in expected.values())
    for name in expected:
        torch.testing.assert_close(actual[name], expected[name], rtol=1e-4, atol=1e-6, msg=name)


@pytest.mark.parametrize("n, batch_size", [(32, 16), (24, 16)])
def test_per_sample_loss_accumulates_to_one_big_batch(tmp_path, n, batch_size):
    # 2 x 16 vs 32, and 16 + 8 vs 24 (unequal micro-batches: a mean of means would differ)
    data = _dataset(n)
    accumulated = _sgd_update(build_loss("ce"), data, batch_size, 2, tmp_path / "ga")
    one_batch = _sgd_update(build_loss("ce"), data, n, 1, tmp_path / "big")
    _assert_same_update(accumulated, one_batch)


def test_batch_level_loss_accumulates_to_mean_of_micro_batch_updates(tmp_path):
    data = _dataset(32)
    loss = build_loss("dice", set_level=True)  # Dice paper eq. 8: one value per batch
    assert loss.is_batch_level
    accumulated = _sgd_update(loss, data, 16, 2, tmp_path / "ga")
    first = _sgd_update(loss, data.select(range(16)), 16, 1, tmp_path / "a")
    second = _sgd_update(loss, data.select(range(16, 32)), 16, 1, tmp_path / "b")
    mean = {name: (first[name] + second[name]) / 2 for name in first}
    _assert_same_update(accumulated, mean)
    summed = {name: first[name] + second[name] for name in first}
    assert not torch.allclose(accumulated["classifier.weight"], summed["classifier.weight"], rtol=1e-2)


def test_scale_for_accumulation_values():
    loss = torch.tensor(3.0, dtype=torch.float64)
    per_sample = scale_for_accumulation(loss, items=8, num_items_in_batch=24, micro_batches=2)
    assert per_sample.item() == pytest.approx(1.0)  # 3 * 8 / 24
    two_processes = scale_for_accumulation(loss, items=8, num_items_in_batch=24, micro_batches=2, num_processes=2)
    assert two_processes.item() == pytest.approx(2.0)
    batch_level = scale_for_accumulation(loss, items=8, num_items_in_batch=24, micro_batches=3, is_batch_level=True)
    assert batch_level.item() == pytest.approx(1.0)  # 3 / 3
    uncounted = scale_for_accumulation(loss, items=8, num_items_in_batch=None, micro_batches=2)
    assert uncounted.item() == pytest.approx(1.5)
    with pytest.raises(ValueError, match=r"^micro_batches:"):
        scale_for_accumulation(loss, items=8, num_items_in_batch=24, micro_batches=0, is_batch_level=True)


def test_count_items_ignores_minus_100():
    assert count_items(torch.tensor([[1, -100, 2], [-100, -100, 0]])).item() == 3


def test_eval_loss_is_not_scaled(tmp_path):
    data = _dataset(16)
    model = _model()
    args = training_arguments(TrainingConfig(), str(tmp_path), evaluate=False, save_strategy="no")
    trainer = LossTrainer(model=model, args=args, data_collator=default_data_collator, loss=build_loss("ce"))
    trainer.current_gradient_accumulation_steps = 4
    batch = default_data_collator([data[i] for i in range(16)])
    model.eval()
    with torch.no_grad():
        expected = torch.nn.functional.cross_entropy(
            model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits, batch["labels"]
        )
        loss = trainer.compute_loss(model, dict(batch), num_items_in_batch=torch.tensor(64))
    torch.testing.assert_close(loss, expected)


def test_precision_resolution_on_this_machine():
    if torch.cuda.is_available():
        pytest.skip("CPU-only expectations")
    assert resolve_precision("auto") == "fp32"
    assert resolve_precision("fp32") == "fp32"
    with pytest.raises(ValueError, match=r"^training.precision:"):
        resolve_precision("bf16")
    with pytest.raises(ValueError, match=r"^training.precision:"):
        resolve_precision("fp8")


def test_training_arguments_follow_the_config(tmp_path):
    training = TrainingConfig.from_mapping({"quiet": True, "gradient_accumulation_steps": 3, "warmup_steps": 0.2})
    args = training_arguments(training, str(tmp_path), evaluate=True)
    assert args.disable_tqdm and args.gradient_accumulation_steps == 3
    assert args.warmup_steps == pytest.approx(0.2)
    assert args.load_best_model_at_end and args.metric_for_best_model == "macro_f1"
    assert args.save_strategy == "epoch" and args.report_to in ([], ["none"], "none")
