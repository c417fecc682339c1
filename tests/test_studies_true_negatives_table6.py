"""Notebook 03's additions: objective variants, Table 2 per checkpoint, the token/word HC levels and
Table 6's comparisons (synonym source, word- against sentence-level SR)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn
from transformers.modeling_outputs import MaskedLMOutput

from workbench.data import sample_corpus
from workbench.models import build_masked_lm
from workbench.studies.true_negatives import experiments, hard_correction
from workbench.synonyms import SynonymTable, lexicon_coverage, neighbours, write_lexicon_tsv
from workbench.viz import checkpoint_rates_figure, comparison_figure, eval_loss_figure, level_rates_figure
from workbench.vocab import load_tokenizer
from workbench.word_vectors import corpus_word_vectors

TINY = {"num_layers": 1, "hidden_size": 32, "num_heads": 2}
LOGIT = 5.0
BEIJING = "北京的风景非常美丽。"
SHANGHAI = "上海的风景非常漂亮。"
PARK = "我们在公园里看风景。"


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer()


class AnswerModel(nn.Module):
    """A stand-in masked LM that predicts fixed token ids per position, whatever the input."""

    def __init__(self, answers: torch.Tensor, vocab_size: int):
        super().__init__()
        self.answers = answers
        self.vocab_size = vocab_size

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        logits = torch.zeros(*input_ids.shape, self.vocab_size)
        logits.scatter_(-1, self.answers[: input_ids.shape[0], : input_ids.shape[1], None], LOGIT)
        return MaskedLMOutput(logits=logits)


def answer_model(tokenizer, answer_text: str, rows: int = 1) -> AnswerModel:
    return AnswerModel(torch.tensor(tokenizer([answer_text])["input_ids"] * rows), len(tokenizer))


def run_metrics(output_dir: str) -> dict:
    return json.loads(Path(output_dir, "metrics.json").read_text(encoding="utf-8"))


def planted_table() -> SynonymTable:
    """Embedding look-up over planted vectors: 美丽 ~ 漂亮 (true synonyms) and 北京 ~ 上海 (neighbours, not
    synonyms)."""
    words = ["美丽", "漂亮", "北京", "上海", "难过"]
    vectors = np.array([[1.0, 0.0, 0.0], [0.99, 0.1, 0.0], [0.0, 1.0, 0.0], [0.05, 0.98, 0.1], [0.0, 0.0, 1.0]])
    return SynonymTable.from_embeddings(vectors, words, k=1, threshold=0.5)


# --------------------------------------------------------------------------- pre-training runs (shared)


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory):
    root = tmp_path_factory.mktemp("nb03")
    base = {
        "data": {
            "source": "sample_corpus",
            "n_sentences": 62,  # 60 distinct texts: 48 pre-train, 12 held out
            "max_train_samples": 48,
            "max_length": 32,
            "eval_fraction": 0.2,
        },
        "model": {"tiny": TINY},
        "objective": {"hc_level": "word"},
        "training": {
            "num_train_epochs": 2,
            "per_device_train_batch_size": 16,
            "learning_rate": 1e-3,
            "quiet": True,
            "logging_steps": 1,
            "dataloader_num_workers": 0,
        },
    }
    plan = [
        ("wwm", "plain"),
        ("wwm", "hc_word"),
        ("wwm", "hc"),
        ("wwm", "sr_sentence"),
        ("wwm", "plain"),
    ]  # a repeat runs once
    runs = experiments.pretraining_runs(base, root / "pre", plan, seed=1)
    lexicon = write_lexicon_tsv(planted_table(), root / "embedding.tsv")
    sources = experiments.pretraining_runs(
        base, root / "pre", [("wwm", "hc_word")], seed=1, synonyms="embedding", lexicon=lexicon
    )
    return base, pd.concat([runs, sources], ignore_index=True), lexicon


def test_runs_apply_the_objective_variants(pretrained):
    _, runs, lexicon = pretrained
    assert list(runs["encoder"]) == ["wwm-plain", "wwm-hc_word", "wwm-hc", "wwm-sr_sentence", "wwm-hc_word@embedding"]
    assert list(runs["synonyms"]) == ["lexicon"] * 4 + ["embedding"]
    objectives = {run.encoder: run_metrics(run.output_dir)["parameters"]["objective"] for run in runs.itertuples()}
    assert (
        objectives["wwm-plain"]["name"] == "plain" and objectives["wwm-plain"]["hc_level"] == "word"
    )  # the base section's
    assert objectives["wwm-hc"]["name"] == "hc" and objectives["wwm-hc"]["hc_level"] == "token"  # the paper's rule
    assert objectives["wwm-hc_word"]["hc_level"] == "word"
    assert objectives["wwm-sr_sentence"]["name"] == "sr" and objectives["wwm-sr_sentence"]["level"] == "sentence"
    assert objectives["wwm-hc_word@embedding"]["lexicon"] == str(lexicon)
    assert list(runs["hc_level"]) == ["word", "word", "token", "word", "word"]
    hc_runs = runs["objective"].str.startswith("hc")
    assert runs.loc[hc_runs, "train_prediction_rate"].between(0, 1).all()
    assert runs.loc[~hc_runs, ["train_prediction_rate", "train_iteration_rate"]].isna().all().all()
    assert np.allclose(runs["perplexity"], np.exp(runs["eval_loss"]))
    assert runs["eval_prediction_rate"].between(0, 1).all()
    history = experiments.loss_history(runs)
    assert set(history["objective"]) == {"plain", "hc_word", "hc", "sr_sentence", "hc_word@embedding"}


def test_epoch_table_equals_the_metrics_json_numbers(pretrained):
    _, runs, _ = pretrained
    epochs = experiments.epoch_table(runs)
    assert list(epochs.columns) == list(experiments.EPOCH_COLUMNS)
    assert len(epochs) == 2 * len(runs)  # two epochs each
    for run in runs.itertuples():
        recorded = run_metrics(run.output_dir)["epochs"]
        rows = epochs[epochs["encoder"] == run.encoder].reset_index(drop=True)
        assert list(rows["step"]) == [record["step"] for record in recorded]
        assert list(rows["checkpoint"]) == pytest.approx(
            [100 * record["step"] / recorded[-1]["step"] for record in recorded]
        )
        assert rows["checkpoint"].iloc[-1] == 100.0
        for row, record in zip(rows.itertuples(), recorded):
            assert row.eval_loss == record["eval_loss"] and row.perplexity == record["perplexity"]
            assert row.eval_prediction_rate == record["eval_hc_prediction_rate"]
            assert row.eval_iteration_rate == record["eval_hc_iteration_rate"]
            assert row.eval_wrong == record["eval_hc_wrong"] and row.eval_corrected == record["eval_hc_corrected"]
            if run.objective.startswith("hc"):
                assert row.train_prediction_rate == record["train_hc_prediction_rate"]
                assert row.train_iteration_rate == record["train_hc_iteration_rate"]
                assert row.train_corrected == record["train_hc_corrected"]
            else:
                assert math.isnan(row.train_prediction_rate) and math.isnan(row.train_iteration_rate)
        # the last epoch's held-out numbers are the run's final ones
        assert (
            run.eval_loss == rows["eval_loss"].iloc[-1]
            and run.eval_prediction_rate == rows["eval_prediction_rate"].iloc[-1]
        )
    shaped = experiments.table2(epochs, "wwm-hc_word")
    word = epochs[epochs["encoder"] == "wwm-hc_word"]
    assert list(shaped.columns) == [
        "Check.",
        "held-out Iter.",
        "held-out Pred.",
        "train Iter.",
        "train Pred.",
        "eval loss",
        "perplexity",
    ]
    assert list(shaped["Check."]) == [50.0, 100.0]
    assert list(shaped["train Pred."]) == pytest.approx(list(100 * word["train_prediction_rate"]))
    assert list(shaped["held-out Iter."]) == pytest.approx(list(100 * word["eval_iteration_rate"]))
    assert experiments.table2(epochs, "wwm-plain")["train Pred."].isna().all()
    fig = checkpoint_rates_figure(epochs, ["wwm-plain", "wwm-hc_word"])
    # plain: held-out only (2 panels); hc_word: held-out and training (2 panels each)
    assert len(fig.data) == 2 + 4
    assert list(fig.data[0].x) == [50.0, 100.0] and list(fig.data[0].y) == pytest.approx(
        list(100 * epochs.iloc[:2]["eval_prediction_rate"])
    )
    assert len(eval_loss_figure(epochs).data) == len(runs)
    with pytest.raises(ValueError, match=r"^encoder:"):
        experiments.table2(epochs, "kdm-plain")
    with pytest.raises(ValueError, match=r"^encoders:"):
        checkpoint_rates_figure(epochs, ["kdm-plain"])
    with pytest.raises(ValueError, match=r"^metric:"):
        eval_loss_figure(epochs, "accuracy")


def test_downstream_takes_the_checkpoint_tokenizer_over_a_vocab_file(pretrained, tmp_path):
    _, runs, _ = pretrained
    vocab = Path(experiments.__file__).parents[2] / "resources" / "vocab.txt"
    base = {
        "data": {"source": "sample_sentences", "max_train_samples": 32, "max_eval_samples": 16, "max_length": 32},
        "model": {"tiny": TINY, "vocab_file": str(vocab)},
        "training": {"num_train_epochs": 1, "per_device_train_batch_size": 16, "learning_rate": 1e-3, "quiet": True},
    }
    finetuned = experiments.downstream_grid(
        base, {"scratch": None, "wwm-plain": runs["output_dir"].iloc[0]}, tmp_path, seeds=[0]
    )
    assert list(finetuned["encoder"]) == ["scratch", "wwm-plain"] and finetuned["macro_f1"].between(0, 1).all()


def test_heldout_corrections_at_both_levels_and_results(pretrained):
    base, runs, _ = pretrained
    texts = hard_correction.heldout_texts(base["data"], 12)
    corrections = hard_correction.correction_table(runs.iloc[:2], texts, SynonymTable.default(), max_length=32)
    assert list(zip(corrections["encoder"], corrections["level"])) == [
        ("wwm-plain", "token"),
        ("wwm-plain", "word"),
        ("wwm-hc_word", "token"),
        ("wwm-hc_word", "word"),
    ]
    single = hard_correction.correction_table(
        runs.iloc[:1], texts, SynonymTable.default(), levels=["word"], max_length=32
    )
    assert single.drop(columns="level").iloc[0].equals(corrections.drop(columns="level").iloc[1])
    assert len(level_rates_figure(corrections).data) == 2
    with pytest.raises(ValueError, match=r"^levels:"):
        hard_correction.correction_table(runs.iloc[:1], texts, SynonymTable.default(), levels=["sentence"])


# --------------------------------------------------------------------------- HC levels on planted predictions


def test_token_level_corrects_single_token_words_only(tokenizer):
    park = answer_model(tokenizer, PARK.replace("看", "瞧"))
    token = hard_correction.worked_example(park, PARK, "看", SynonymTable.default(), tokenizer)
    assert token["predicted"] == "瞧" and token["corrected"] and token["loss_hc"] == 0.0
    word = hard_correction.worked_example(park, PARK, "看", SynonymTable.default(), tokenizer, level="word")
    assert word["corrected"]  # a one-token word is a word at both levels
    beautiful = answer_model(tokenizer, BEIJING.replace("美丽", "漂亮"))
    assert not hard_correction.worked_example(beautiful, BEIJING, "美丽", SynonymTable.default(), tokenizer)[
        "corrected"
    ]
    assert hard_correction.worked_example(beautiful, BEIJING, "美丽", SynonymTable.default(), tokenizer, level="word")[
        "corrected"
    ]
    with pytest.raises(ValueError, match=r"^level:"):
        hard_correction.worked_example(beautiful, BEIJING, "美丽", SynonymTable.default(), tokenizer, level="sentence")


# --------------------------------------------------------------------------- synonym sources


def test_embedding_lookup_finds_the_planted_neighbours_and_the_lexicon_does_not(tokenizer):
    table = planted_table()
    assert table.are_synonyms("美丽", "漂亮") and table.are_synonyms("北京", "上海")
    assert not table.synonyms("难过") and {frozenset(group) for group in table.groups} == {
        frozenset({"美丽", "漂亮"}),
        frozenset({"北京", "上海"}),
    }
    lexicon = SynonymTable.default()
    assert lexicon.are_synonyms("美丽", "漂亮") and not lexicon.are_synonyms("北京", "上海")
    # the lexicon corrects the planted synonym prediction; so does the embedding table ...
    beautiful = answer_model(tokenizer, BEIJING.replace("美丽", "漂亮"))
    for source in (lexicon, table):
        assert hard_correction.worked_example(beautiful, BEIJING, "美丽", source, tokenizer, level="word")["corrected"]
    # ... but embedding look-up also drops 北京 -> 上海, a true negative (the paper's "noise")
    city = answer_model(tokenizer, BEIJING.replace("北京", "上海"))
    assert not hard_correction.worked_example(city, BEIJING, "北京", lexicon, tokenizer, level="word")["corrected"]
    assert hard_correction.worked_example(city, BEIJING, "北京", table, tokenizer, level="word")["corrected"]
    # no threshold: every word gets its k nearest (the paper's top 10)
    vectors = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    assert SynonymTable.from_embeddings(vectors, ["a", "b", "c"], k=1, threshold=None).are_synonyms("c", "b")
    assert not SynonymTable.from_embeddings(vectors, ["a", "b", "c"], k=1, threshold=0.5).groups
    with pytest.raises(ValueError, match="threshold"):
        SynonymTable.from_embeddings(vectors, ["a", "b", "c"], threshold=2.0)
    # the defaults are the paper's: top 10, no threshold (the threshold is the workbench's option)
    default = SynonymTable.from_embeddings(vectors, ["a", "b", "c"])
    assert {frozenset(group) for group in default.groups} == {
        frozenset(pair) for pair in (("a", "b"), ("a", "c"), ("b", "c"))
    }
    assert SynonymTable.from_embeddings(vectors, ["a", "b", "c"], k=1).are_synonyms("c", "b")


def test_lexicon_tsv_round_trip(tmp_path):
    table = SynonymTable([["美丽", "漂亮", "好看"], ["北京", "上海"]])
    path = write_lexicon_tsv(table, tmp_path / "sub" / "lexicon.tsv")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert (
        lines[0].startswith("#") and lines[1] == "emb000000\tx\t上海\t北京" and len(lines) == 3
    )  # sorted by code point
    assert sorted(map(sorted, SynonymTable.from_path(path).groups)) == sorted(map(sorted, table.groups))
    twice = write_lexicon_tsv(planted_table(), tmp_path / "planted.tsv")  # a pair listed from both sides: one line
    assert len(twice.read_text(encoding="utf-8").splitlines()) == 1 + 2
    with pytest.raises(ValueError, match=r"^path:"):
        write_lexicon_tsv(table, tmp_path / "lexicon.txt")
    with pytest.raises(ValueError, match=r"^table:"):
        write_lexicon_tsv(SynonymTable([["ice_cream", "gelato"]]), tmp_path / "bad.tsv")


def test_lexicon_coverage_by_hand(tokenizer, tmp_path):
    english = SynonymTable.from_path(
        write_lexicon_tsv(SynonymTable([["happy", "glad"], ["big", "large"]]), tmp_path / "wordnet.tsv")
    )
    tables = {"lexicon": SynonymTable.default(), "embedding": planted_table(), "wordnet": english}
    documents, vocabulary = (
        hard_correction.corpus_words([BEIJING, SHANGHAI]),
        hard_correction.vocabulary_words(tokenizer),
    )
    coverage = lexicon_coverage(tables, documents, vocabulary, reference="lexicon").set_index("source")
    assert list(coverage.columns) == [
        "words",
        "pairs",
        "corpus_word_types",
        "corpus_word_tokens",
        "corpus_pairs",
        "vocabulary_tokens",
        "in_reference",
    ]
    # words: 北京 的 风景 非常 美丽 / 上海 的 风景 非常 漂亮 -> 7 types, 10 occurrences
    assert coverage.loc["lexicon", "corpus_word_types"] == pytest.approx(3 / 7)  # 非常 美丽 漂亮
    assert coverage.loc["lexicon", "corpus_word_tokens"] == pytest.approx(4 / 10)
    assert coverage.loc["lexicon", "corpus_pairs"] == 1 and coverage.loc["lexicon", "in_reference"] == 1.0
    assert coverage.loc["embedding", "corpus_word_types"] == pytest.approx(4 / 7)  # 北京 上海 美丽 漂亮
    assert coverage.loc["embedding", "corpus_pairs"] == 2 and coverage.loc["embedding", "in_reference"] == 0.5
    assert coverage.loc["embedding", ["words", "pairs"]].tolist() == [4, 2]
    assert coverage.loc["embedding", "vocabulary_tokens"] == 0.0  # two-character words are no vocabulary token
    assert coverage.loc["lexicon", "vocabulary_tokens"] > 0  # 大 巨 看 瞧 很 ... are
    assert coverage.loc["wordnet", "corpus_word_types"] == 0.0 and coverage.loc["wordnet", "corpus_pairs"] == 0
    assert math.isnan(coverage.loc["wordnet", "in_reference"])
    table = neighbours(tables, ["美丽", "北京"]).set_index("word")
    assert (
        table.loc["美丽", "embedding"] == "漂亮"
        and table.loc["北京", "lexicon"] == ""
        and table.loc["北京", "embedding"] == "上海"
    )
    with pytest.raises(ValueError, match=r"^reference:"):
        lexicon_coverage(tables, documents, vocabulary, reference="cilin")


def test_corpus_word_vectors_put_substitutable_words_together():
    texts = sample_corpus(n_sentences=400, seed=3)
    vectors, words = corpus_word_vectors(hard_correction.corpus_words(texts), dim=20, window=2, min_count=2)
    assert vectors.shape == (len(words), 20) and vectors.dtype == np.float32
    assert len(set(words)) == len(words) and "，" not in words and "。" not in words
    counts = [sum(text.count(word) for text in texts) for word in words[:3]]
    assert counts == sorted(counts, reverse=True) or words[0] in ("的", "在")  # most frequent first
    again, _ = corpus_word_vectors(hard_correction.corpus_words(texts), dim=20, window=2, min_count=2)
    np.testing.assert_array_equal(vectors, again)
    nearest = SynonymTable.from_embeddings(vectors, words, k=1, threshold=None)
    for a, b in (("美丽", "漂亮"), ("迅速", "快速"), ("重要", "关键")):  # the corpus uses them in the same slots
        assert nearest.are_synonyms(a, b), (a, nearest.synonyms(a))
    with pytest.raises(ValueError, match=r"^documents:"):
        corpus_word_vectors([["美丽"]], min_count=2)


def test_model_word_vectors_average_the_input_embeddings(tokenizer):
    model = build_masked_lm(tiny={**TINY, "vocab_size": len(tokenizer)})
    matrix = model.get_input_embeddings().weight.detach()
    vectors, kept = hard_correction.model_word_vectors(model, ["美丽", "北京", "美丽", "龘龘"], tokenizer)
    assert kept == ["美丽", "北京"]  # duplicates once, unknown characters left out
    ids = tokenizer("美丽", add_special_tokens=False)["input_ids"]
    np.testing.assert_allclose(vectors[0], matrix[ids].mean(dim=0).numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match=r"^words:"):
        hard_correction.model_word_vectors(model, ["美丽"], tokenizer)


# --------------------------------------------------------------------------- Table 6 tables


def results_fixture() -> pd.DataFrame:
    encoders = ["no_pretraining", "wwm-plain", "wwm-hc_word", "wwm-hc_word@embedding", "wwm-sr", "wwm-sr_sentence"]
    return pd.DataFrame(
        {
            "encoder": encoders,
            "masking": [np.nan, "wwm", "wwm", "wwm", "wwm", "wwm"],
            "objective": [np.nan, "plain", "hc_word", "hc_word", "sr", "sr_sentence"],
            "synonyms": [np.nan, "lexicon", "lexicon", "embedding", "lexicon", "lexicon"],
            "train_loss": [np.nan, 3.0, 2.9, 2.5, 3.2, 3.4],
            "eval_loss": [np.nan, 2.0, 2.1, 2.4, 2.05, 2.2],
            "perplexity": [np.nan, *np.exp([2.0, 2.1, 2.4, 2.05, 2.2])],
            "time": [np.nan, 10.0, 11.0, 11.0, 10.5, 25.0],
            "train_prediction_rate": [np.nan, np.nan, 0.02, 0.30, np.nan, np.nan],
            "train_iteration_rate": [np.nan, np.nan, 0.03, 0.40, np.nan, np.nan],
            "eval_prediction_rate": [np.nan, 0.01, 0.02, 0.25, 0.01, 0.01],
            "eval_iteration_rate": [np.nan, 0.02, 0.03, 0.35, 0.02, 0.02],
            "heldout_prediction_rate": [np.nan, 0.01, 0.02, 0.02, 0.01, 0.0],
            "macro_f1": ["x"] * 6,
            "macro_f1_mean": [0.50, 0.60, 0.62, 0.55, 0.64, 0.61],
            "macro_f1_std": [0.01] * 6,
            "n": [2] * 6,
        }
    )


def test_table6_comparisons_pick_their_rows_and_deltas():
    results = results_fixture()
    sources = experiments.synonym_source_table(results)
    assert list(sources["encoder"]) == ["wwm-plain", "wwm-hc_word", "wwm-hc_word@embedding"]
    assert list(sources["variant"]) == ["baseline", "HC (lexicon)", "HC (embedding)"]
    assert list(sources["delta_macro_f1"]) == pytest.approx([0.0, 0.02, -0.05])
    assert list(sources["train_prediction_rate"].iloc[1:]) == [0.02, 0.30]
    levels = experiments.sr_level_table(results)
    assert list(levels["encoder"]) == ["wwm-plain", "wwm-sr", "wwm-sr_sentence"]
    assert list(levels["variant"]) == ["baseline", "SR word (eq. 3)", "SR sentence (KL)"]
    assert list(levels["delta_macro_f1"]) == pytest.approx([0.0, 0.04, 0.01])
    assert list(levels["time"]) == [10.0, 10.5, 25.0]
    assert set(experiments.COMPARISON_COLUMNS) >= set(levels.columns)
    fig = comparison_figure(levels, "SR level")
    assert list(fig.data[0].y) == pytest.approx([0.60, 0.64, 0.61]) and list(fig.data[1].y) == pytest.approx(
        list(levels["perplexity"])
    )
    with pytest.raises(ValueError, match=r"^masking/objective:"):
        experiments.synonym_source_table(results, masking="kdm")
    with pytest.raises(ValueError, match=r"^baseline:"):
        experiments.sr_level_table(results, masking="random")


def test_results_table_spreads_the_levels_and_headline_adds_them():
    runs = pd.DataFrame(
        {
            "encoder": ["wwm-plain", "wwm-hc_word"],
            "masking": ["wwm", "wwm"],
            "objective": ["plain", "hc_word"],
            "synonyms": ["lexicon"] * 2,
            "train_loss": [3.0, 2.9],
            "eval_loss": [2.0, 2.2],
            "perplexity": [7.4, 9.0],
            "time": [1.0, 1.0],
            "train_prediction_rate": [np.nan, 0.04],
            "train_iteration_rate": [np.nan, 0.05],
            "eval_prediction_rate": [0.0, 0.1],
            "eval_iteration_rate": [0.0, 0.2],
            "output_dir": ["a", "b"],
        }
    )
    corrections = pd.DataFrame(
        {
            "encoder": ["wwm-plain"] * 2 + ["wwm-hc_word"] * 2,
            "masking": ["wwm"] * 4,
            "objective": ["plain", "plain", "hc_word", "hc_word"],
            "level": ["token", "word"] * 2,
            "prediction_rate": [0.0, 0.1, 0.0, 0.3],
            "iteration_rate": [0.0, 0.2, 0.0, 0.4],
        }
    )
    finetuned = pd.DataFrame(
        {"encoder": ["no_pretraining", "wwm-plain", "wwm-hc_word"], "macro_f1": [0.4, 0.5, 0.6], "accuracy": [0.5] * 3}
    )
    results = experiments.results_table(runs, corrections, experiments.downstream_summary(finetuned))
    row = results.set_index("encoder").loc["wwm-hc_word"]
    assert row["heldout_prediction_rate"] == 0.3 and row["heldout_prediction_rate_token"] == 0.0
    assert row["heldout_iteration_rate_word"] == 0.4 and row["perplexity"] == 9.0 and row["synonyms"] == "lexicon"
    token = experiments.results_table(runs, corrections, experiments.downstream_summary(finetuned), level="token")
    assert token.set_index("encoder").loc["wwm-hc_word", "heldout_prediction_rate"] == 0.0
    metrics = experiments.headline_metrics(results)
    assert metrics["heldout_prediction_rate_word_mean"] == pytest.approx(0.2)
    assert metrics["heldout_prediction_rate_token_mean"] == 0.0
    assert metrics["train_prediction_rate_hc_word_mean"] == pytest.approx(0.04)
    assert metrics["train_prediction_rate_hc_mean"] is None and metrics["perplexity_min"] == 7.4
    with pytest.raises(ValueError, match=r"^level:"):
        experiments.results_table(runs, corrections, experiments.downstream_summary(finetuned), level="sentence")
    epochs = pd.DataFrame(
        {
            "encoder": ["wwm-hc_word"] * 2,
            "checkpoint": [50.0, 100.0],
            "eval_prediction_rate": [0.0, 0.0305],
            "perplexity": [49.0, 7.0],
        }
    )
    line = experiments.this_run(results, epochs, "wwm-hc_word")
    assert (
        "wwm-hc_word, held-out prediction-level HC rate per checkpoint 50%: 0.00%, 100%: 3.05% (perplexity 49.0 -> 7.0)"
        in line
    )
    assert "Training-time HC rate over the run: wwm-hc_word 4.00%." in line
    assert "token / word level: wwm-plain 0.00% / 10.00%, wwm-hc_word 0.00% / 30.00%." in line
    assert "wwm-plain: train loss 3.000, perplexity 7.40, 1 s, macro-F1 0.500" in line
    assert line.endswith("best encoder wwm-hc_word (0.600), no_pretraining 0.400.")


def test_bad_run_requests_raise(tmp_path):
    with pytest.raises(ValueError, match=r"^objectives:"):
        experiments.pretraining_runs({}, tmp_path, [("wwm", "hc_sentence")])
    with pytest.raises(ValueError, match=r"^plan:"):
        experiments.pretraining_runs({}, tmp_path, [("wwm",)])
    with pytest.raises(ValueError, match=r"^plan:"):
        experiments.pretraining_runs({}, tmp_path, [])
    with pytest.raises(ValueError, match=r"^strategies:"):
        experiments.pretraining_runs({}, tmp_path, [("bert", "plain")])
    with pytest.raises(ValueError, match=r"^synonyms:"):
        experiments.pretraining_runs({}, tmp_path, [("wwm", "hc")], lexicon="x.tsv")
    with pytest.raises(ValueError, match=r"^synonyms:"):
        experiments.pretraining_runs({}, tmp_path, [("wwm", "hc")], synonyms="embedding")
