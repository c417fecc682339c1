"""The workbench's own encoder (issue 11): the publishing path on a checkpoint the tests make themselves,
the gpu parameter sets' model paths, and, once it is published, models/workbench-zh-mini itself."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch
import yaml
from safetensors import safe_open
from transformers import AutoModelForMaskedLM, AutoTokenizer

from workbench.models import build_masked_lm, build_sequence_classifier
from workbench.train import finetune, pretrain_mlm
from workbench.vocab import load_tokenizer

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "models" / "workbench-zh-mini"
MODEL_PATH_FROM_NOTEBOOKS = "../models/workbench-zh-mini"  # params paths are relative to notebooks/
SIZE_LIMIT_BYTES = 25 * 10**6
SHARD_LIMIT_BYTES = 15 * 2**20
TEXTS = ["这里的风景非常美丽", "游客们都很开心", "今天的新闻报道了经济发展"]


def _publish_module():
    spec = importlib.util.spec_from_file_location("publish_encoder", ROOT / "scripts" / "publish_encoder.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _logits_both_ways(folder: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked-LM logits of the same batch through workbench.models and through the Auto classes."""
    ours_tokenizer, auto_tokenizer = load_tokenizer(folder), AutoTokenizer.from_pretrained(str(folder))
    batch = ours_tokenizer(TEXTS, padding=True, return_tensors="pt")
    assert torch.equal(batch["input_ids"], auto_tokenizer(TEXTS, padding=True, return_tensors="pt")["input_ids"])
    ours = build_masked_lm(model_name_or_path=folder).eval()
    auto = AutoModelForMaskedLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    with torch.no_grad():
        return ours(**batch).logits, auto(**batch).logits


def _check_published_folder(folder: Path) -> None:
    shards = sorted(folder.glob("*.safetensors"))
    dtypes = set()
    for shard in shards:
        assert shard.stat().st_size <= SHARD_LIMIT_BYTES, shard.name
        with safe_open(str(shard), framework="pt") as weights:
            dtypes |= {weights.get_slice(name).get_dtype() for name in weights.keys()}
    assert dtypes == {"F16"}
    assert sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()) <= SIZE_LIMIT_BYTES
    ours, auto = _logits_both_ways(folder)
    assert ours.shape[-1] == len(load_tokenizer(folder))
    torch.testing.assert_close(ours, auto, rtol=0, atol=0)


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Path:
    """A tiny pretrain_mlm run published exactly as models/workbench-zh-mini is (scripts/publish_encoder.py)."""
    base = tmp_path_factory.mktemp("encoder")
    run = pretrain_mlm(
        {
            "task": "pretrain_mlm",
            "output_dir": str(base / "run"),
            "data": {"source": "sample_corpus", "n_sentences": 32, "max_length": 32},
            "model": {"tiny": {"num_layers": 1, "hidden_size": 32, "num_heads": 2}},
            "training": {"num_train_epochs": 1, "per_device_train_batch_size": 16, "quiet": True},
        }
    )
    target = base / "published"
    _publish_module().publish(run.output_dir, target, command=COMMAND, hardware="a test's CPU")
    return target


COMMAND = "python -m workbench.train params/pretrain/workbench-zh-mini.yaml training.time_budget_s=300"


@pytest.mark.slow
def test_published_checkpoint_is_fp16_small_and_loads_the_same_both_ways(published):
    _check_published_folder(published)
    card = (published / "README.md").read_text(encoding="utf-8")
    metrics = json.loads((published.parent / "run" / "metrics.json").read_text(encoding="utf-8"))
    last = metrics["epochs"][-1]
    for needed in (
        "`sample_corpus`",  # the corpus
        f"{last['step']:,} steps",
        f"{round(last['epoch'] * metrics['tokens_per_epoch']):,} tokens",
        f"{metrics['perplexity']:.2f}",
        f"    {COMMAND}\n",
        "a test's CPU",
        "Licence",
    ):
        assert needed in card, needed


@pytest.mark.slow
def test_publish_refuses_a_folder_over_the_size_limit(published, tmp_path, monkeypatch):
    publish = _publish_module()
    monkeypatch.setattr(publish, "SIZE_LIMIT_BYTES", 10_000)
    with pytest.raises(ValueError, match="target: .* bytes, over the limit of 10,000"):
        publish.publish(published.parent / "run", tmp_path / "target")


def test_the_model_card_says_when_the_time_budget_stopped_the_run():
    metrics = {
        "parameters": {
            "data": {"path": ["/kit/data/corpus/xwlb_news.txt.gz"], "source": "corpus", "max_length": 128},
            "model": {"tiny": {"num_layers": 6, "hidden_size": 256, "num_heads": 4}},
            "training": {"time_budget_s": 260, "num_train_epochs": 6, "per_device_train_batch_size": 256},
        },
        "epochs": [{"epoch": 2.5, "step": 2900, "eval_masked_tokens": 25_000}],
        "tokens_per_epoch": 36_000_000,
        "num_parameters": {"total": 10_268_552},
        "corpus_characters": 37_000_000,
        "blocks": {"train": 297_000, "eval": 1_500},
        "masking": "wwm",
        "objective": "plain",
        "perplexity": 31.4159,
        "eval_loss": 3.4473,
        "train_runtime": 259.0,
    }
    metrics["parameters"]["data"]["eval_fraction"] = 0.005
    metrics["parameters"]["training"].update(learning_rate=1e-3, precision="bf16")
    card = _publish_module().model_card(metrics, COMMAND, hardware="NVIDIA H100 80GB HBM3")
    assert "`corpus/xwlb_news.txt.gz`: 37,000,000 characters" in card
    assert "2,900 steps of 256 blocks, 2.5 epochs, 90,000,000 tokens, stopped by its time budget (260 s)" in card
    assert "31.42 (loss 3.4473)" in card and "259 s on NVIDIA H100 80GB HBM3" in card


def test_publish_refuses_a_target_that_holds_files(tmp_path):
    publish = _publish_module()
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.json").write_text("{}", encoding="utf-8")
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "README.md").write_text("a card written by hand\n", encoding="utf-8")
    with pytest.raises(ValueError, match="target: .*already holds files .*--replace"):
        publish.publish(run, tmp_path / "target")
    assert (tmp_path / "target" / "README.md").read_text(encoding="utf-8") == "a card written by hand\n"


@pytest.mark.slow
def test_one_step_finetune_from_a_published_checkpoint(published, tmp_path):
    result = finetune(
        {
            "output_dir": str(tmp_path / "ft"),
            "data": {"source": "sample_relevance", "max_train_samples": 16, "max_eval_samples": 16, "max_length": 32},
            "model": {"model_name_or_path": str(published)},
            "training": {"num_train_epochs": 1, "per_device_train_batch_size": 16, "quiet": True},
        }
    )
    assert [entry["step"] for entry in result.history if "eval_macro_f1" in entry] == [1]
    assert 0.0 <= result.metrics["macro_f1"] <= 1.0


def _gpu_model_paths() -> dict[str, str]:
    """Every model path in the gpu parameter sets (model.model_name_or_path, encoders.*.model_name_or_path)."""
    paths = {}
    for file in sorted((ROOT / "params" / "gpu").glob("*.yaml")):
        parameters = yaml.safe_load(file.read_text(encoding="utf-8"))
        sections = {"model": parameters.get("model", {})}
        sections.update({f"encoders.{name}": spec for name, spec in parameters.get("encoders", {}).items()})
        for name, section in sections.items():
            if section.get("model_name_or_path") is not None:
                paths[f"{file.stem}: {name}"] = section["model_name_or_path"]
    return paths


def test_every_gpu_set_fine_tunes_the_workbench_encoder():
    paths = _gpu_model_paths()
    assert len(paths) == 5, paths  # one encoder per notebook (02: beside its from-scratch twin)
    assert set(paths.values()) == {MODEL_PATH_FROM_NOTEBOOKS}, paths
    assert (ROOT / "notebooks" / MODEL_PATH_FROM_NOTEBOOKS).resolve() == PUBLISHED


@pytest.mark.slow
def test_the_published_workbench_encoder():
    if not PUBLISHED.exists():
        pytest.skip(
            "models/workbench-zh-mini is not published yet: its pre-training run needs the GPU machine (issue 11)"
        )
    _check_published_folder(PUBLISHED)
    card = (PUBLISHED / "README.md").read_text(encoding="utf-8")
    for needed in ("perplexity", "python -m workbench.train params/pretrain/workbench-zh-mini.yaml", "licen"):
        assert needed in card, needed


def _dry_run_module():
    spec = importlib.util.spec_from_file_location("gpu_dry_run", ROOT / "scripts" / "gpu_dry_run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gpu_dry_run_takes_any_classifier_checkpoint(tmp_path):
    # a 2-label classifier checkpoint: its head would not load into notebook 02's 3-label classifier
    classifier = build_sequence_classifier(
        2, tiny={"num_layers": 1, "hidden_size": 32, "num_heads": 2, "vocab_size": 4500}
    )
    classifier.save_pretrained(str(tmp_path / "classifier"))
    load_tokenizer().save_pretrained(str(tmp_path / "classifier"))
    dry_run = _dry_run_module()
    encoder = dry_run.stand_in_encoder(tmp_path / "classifier", tmp_path / "work")
    three_way = build_sequence_classifier(3, model_name_or_path=encoder)
    masked_lm = build_masked_lm(model_name_or_path=encoder)
    for model in (three_way, masked_lm):  # the encoder's weights came along, only the heads are new
        torch.testing.assert_close(
            model.base_model.embeddings.word_embeddings.weight, classifier.bert.embeddings.word_embeddings.weight
        )
    micro = dry_run.micro_parameters(
        yaml.safe_load((ROOT / "params" / "gpu" / "02_propensity_corrected_loss.yaml").read_text())
    )
    assert micro["seeds"] == [0] and micro["training"]["precision"] == "fp32"
    assert micro["encoders"]["scratch"]["tiny"]["num_layers"] == 1  # the from-scratch twin at its smallest


def test_gpu_dry_run_refuses_a_folder_that_is_no_checkpoint(tmp_path, capsys):
    import sys

    (tmp_path / "empty").mkdir()
    argv = [
        "gpu_dry_run.py",
        "--encoder",
        str(tmp_path / "empty"),
        "--data-dir",
        str(tmp_path),
        "--work-dir",
        str(tmp_path / "w"),
    ]
    sys.argv, saved = argv, sys.argv
    try:
        with pytest.raises(SystemExit) as exit_info:
            _dry_run_module().main()
    finally:
        sys.argv = saved
    assert exit_info.value.code == 2 and "error: --encoder:" in capsys.readouterr().err


def _script_error(script: str, arguments: list[str], capsys) -> str:
    import sys

    spec = importlib.util.spec_from_file_location(script, ROOT / "scripts" / f"{script}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.argv, saved = [f"{script}.py", *arguments], sys.argv
    try:
        with pytest.raises(SystemExit) as exit_info:
            module.main()
    finally:
        sys.argv = saved
    assert exit_info.value.code == 2
    return capsys.readouterr().err


def test_scripts_say_plainly_that_the_encoder_is_not_published(tmp_path, capsys):
    # transformers' own message for a missing local folder is "Repo id must be in the form ..."
    error = _script_error("publish_encoder", [str(tmp_path / "no-run"), str(tmp_path / "target")], capsys)
    assert "error: run_dir:" in error and not (tmp_path / "target").exists()
    error = _script_error("encoder_evidence", ["--qbqtc", "dev.json", "--encoder", f"mini={PUBLISHED}"], capsys)
    assert "error: --encoder mini:" in error and "not published" in error
