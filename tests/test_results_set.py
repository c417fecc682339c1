"""The ``results`` parameter set: its files, and a smoke version of it run end to end on a tiny data root built here
from the generated sample data (no WORKBENCH_DATA needed), every notebook recording claim rows for results.md."""

from __future__ import annotations

import copy
import gzip
import io
import json
from pathlib import Path

import pytest
import yaml

from workbench.data import sample_corpus, sample_relevance_pairs, sample_sentences
from workbench.data_root import DATA_ROOT_ENV
from workbench.runs import run
from workbench.runs.plan import plan_executions
from workbench.runs.results import RESULTS_FILE, results_markdown

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "params" / "results"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_the_results_set_runs_every_notebook_with_evidence_and_five_seeds():
    executions = plan_executions(NOTEBOOKS, ROOT / "params", "results")
    assert [execution.name for execution in executions] == [path.stem for path in NOTEBOOKS]
    for execution in executions:
        assert execution.parameters["evidence"] is True, execution.name
        assert len(execution.parameters["seeds"]) >= 5, execution.name
    overridden = plan_executions(NOTEBOOKS, ROOT / "params", "results", seeds=[3, 4])
    assert all(execution.parameters["seeds"] == [3, 4] for execution in overridden)  # --seeds overrides them


def _data_root(folder: Path) -> Path:
    """A data root in the releases' layout, every file small and generated: QBQTC's dev.json only (train and test are
    cut from it), ChnSentiCorp's train and dev, TNEWS's train and labels, the news corpus and a Cilin lexicon."""
    (folder / "qbqtc").mkdir(parents=True)
    pairs = sample_relevance_pairs(600, seed=1)
    with open(folder / "qbqtc" / "dev.json", "w", encoding="utf-8") as handle:
        for index, row in enumerate(pairs):
            record = {"id": index, "query": row["text"], "title": row["text_pair"], "label": str(row["label"])}
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    (folder / "chnsenticorp").mkdir()
    for name, seed, n in (("train.txt", 2, 600), ("dev.txt", 3, 150)):
        sentences = sample_sentences(n, seed=seed, positive_share=0.5)
        lines = [f"{row['text']}\t{row['label']}\n" for row in sentences]
        (folder / "chnsenticorp" / name).write_text("".join(lines), encoding="utf-8")
    (folder / "tnews").mkdir()
    labels = [{"label": "100", "label_desc": "news_story"}, {"label": "101", "label_desc": "news_culture"}]
    (folder / "tnews" / "labels.json").write_text("".join(json.dumps(row) + "\n" for row in labels), encoding="utf-8")
    with open(folder / "tnews" / "train.json", "w", encoding="utf-8") as handle:
        for row in sample_sentences(400, seed=4, positive_share=0.5):
            label = labels[row["label"]]
            handle.write(json.dumps({**label, "sentence": row["text"], "keywords": ""}, ensure_ascii=False) + "\n")
    (folder / "corpus").mkdir()
    with gzip.open(folder / "corpus" / "xwlb_news.txt.gz", "wt", encoding="utf-8") as handle:
        handle.write("".join(sentence + "\n" for sentence in sample_corpus(120, seed=5)))
    (folder / "cilin").mkdir()
    lexicon = (ROOT / "workbench" / "resources" / "lexicon_tiny.txt").read_text(encoding="utf-8")
    (folder / "cilin" / "cilin_ex.txt").write_text(lexicon, encoding="utf-8")
    return folder


SMOKE = {  # what shrinks each results file to seconds; everything else is the results set's own
    "01_dice_loss": {
        "data": {"max_train_samples": 300, "max_eval_samples": 150, "max_length": 32},
        "training": {"num_train_epochs": 2},
        "tversky_alphas": [0.3, 0.5],
    },
    "02_propensity_corrected_loss": {
        "data": {"max_train_samples": 300, "max_eval_samples": 100, "max_length": 32},
        "training": {"num_train_epochs": 2},
    },
    "03_true_negatives": {
        "illustration_draws": 10,
        "data": {"max_train_samples": 40, "max_length": 32, "eval_fraction": 0.2},
        "heldout_texts": 20,
        "model": {"tiny": {"num_layers": 1, "hidden_size": 32, "num_heads": 2}},
        "pretrain_training": {"num_train_epochs": 1, "per_device_train_batch_size": 20, "logging_steps": 5},
        "embedding": {"dim": 16, "min_count": 2},
        "finetune_data": {"max_train_samples": 64, "max_eval_samples": 32},
        "finetune_training": {"num_train_epochs": 1},
    },
    "04_auxiliary_labels": {
        "data": {"max_train_samples": 64, "max_eval_samples": 32, "max_length": 24},
        "model": {"tiny": {"num_layers": 1, "hidden_size": 32, "num_heads": 2}},
        "training": {"num_train_epochs": 1},
        "aux": {"stage2_epochs": 1},
        "num_aux_values": [0, 2],
        "entropy_k": 2,
        "entropy_n_max": 8,
    },
    "05_pcl_vs_dice_walkthrough": {
        "data": {"max_train_samples": 300, "max_eval_samples": 100, "max_length": 32},
        "training": {"num_train_epochs": 2},
    },
}


def _merged(base: dict, changes: dict) -> dict:
    merged = copy.deepcopy(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict) and key != "model":
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


@pytest.mark.slow
def test_a_smoke_version_of_the_results_set_writes_the_results_page(tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_ROOT_ENV, str(_data_root(tmp_path / "data-root")))
    params = tmp_path / "params" / "results-smoke"
    params.mkdir(parents=True)
    for path in sorted(RESULTS.glob("*.yaml")):
        smoke = _merged(yaml.safe_load(path.read_text(encoding="utf-8")), SMOKE[path.stem])
        (params / path.name).write_text(yaml.safe_dump(smoke, allow_unicode=True), encoding="utf-8")
    report = run(
        params_set="results-smoke",
        seeds=[0, 1],
        notebooks_dir=ROOT / "notebooks",
        params_dir=tmp_path / "params",
        outputs_dir=tmp_path / "outputs",
        run_id="results-smoke",
        stream=io.StringIO(),
    )
    assert {o.execution.name: f"cell {o.failed_cell}: {o.error}" for o in report.failed} == {}
    page = (report.run_dir / RESULTS_FILE).read_text(encoding="utf-8")
    assert page == results_markdown(report.run_dir)  # the page is its run's metrics.json, printed
    for outcome in report.outcomes:
        evidence = json.loads((outcome.output_dir / "metrics.json").read_text(encoding="utf-8"))["evidence"]
        assert evidence["claims"], outcome.execution.name
        assert f"## {outcome.execution.name}: {evidence['title']}" in page
        assert evidence["seeds"] == [0, 1]
    assert str(tmp_path / "data-root") not in page  # the data root is this machine's path, never printed
    assert "test (cut from qbqtc/dev.json)" in page  # a split cut from the files present says so
    assert 'id="results"' in (report.run_dir / "index.html").read_text(encoding="utf-8")
