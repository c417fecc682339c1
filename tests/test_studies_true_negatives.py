"""The true-negatives study (notebook 03): masking tables, correction statistics, grids, summaries."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn
from transformers.modeling_outputs import MaskedLMOutput

from workbench.data import sample_corpus
from workbench.masking import JiebaSegmenter, encode_words
from workbench.studies.true_negatives import experiments, hard_correction, masking_demo
from workbench.synonyms import SynonymTable
from workbench.viz import downstream_figure, masking_heatmap, pretraining_loss_figure
from workbench.vocab import load_tokenizer

TEXT = "张伟昨天在北京参观了清华大学，那里的风景非常美丽。"
TINY = {"num_layers": 1, "hidden_size": 32, "num_heads": 2}
LOGIT = 5.0


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer()


class AnswerModel(nn.Module):
    """A stand-in masked LM that predicts fixed token ids per (row, position), whatever the input."""

    def __init__(self, answers: torch.Tensor, vocab_size: int):
        super().__init__()
        self.answers = answers
        self.vocab_size = vocab_size

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        width = input_ids.shape[1]
        logits = torch.zeros(*input_ids.shape, self.vocab_size)
        logits.scatter_(-1, self.answers[: input_ids.shape[0], :width, None], LOGIT)
        return MaskedLMOutput(logits=logits)


def answer_model(tokenizer, answer_text: str, rows: int) -> AnswerModel:
    ids = torch.tensor(tokenizer([answer_text])["input_ids"] * rows)
    return AnswerModel(ids, len(tokenizer))


def word_positions(tokenizer, text: str, word: str) -> list[int]:
    feature = encode_words(tokenizer, [text], JiebaSegmenter())[0]
    index = feature["words"].index(word)
    return [position for position, w in enumerate(feature["word_ids"]) if w == index]


# --------------------------------------------------------------------------- masking


def test_transformers_wwm_is_all_or_nothing_and_ours_hits_the_budget(tokenizer):
    texts = sample_corpus(n_sentences=6, seed=1)
    chosen, maskable = masking_demo.mask_draws(
        texts, masking_demo.TRANSFORMERS_WWM, tokenizer=tokenizer, draws=60, seed=0
    )
    share = (chosen & maskable).sum(axis=2) / maskable.sum(axis=1)
    assert set(np.unique(share)) <= {0.0, 1.0} and (share == 1.0).any()
    chosen, maskable = masking_demo.mask_draws(texts, "random", tokenizer=tokenizer, draws=5, seed=0)
    budget = np.rint(0.15 * maskable.sum(axis=1))
    assert ((chosen & maskable).sum(axis=2) == budget).all() and not (chosen & ~maskable).any()


def test_summary_matches_the_draws(tokenizer):
    texts = sample_corpus(n_sentences=4, seed=2)
    summary = masking_demo.masked_share_summary(
        texts, ["wwm", masking_demo.TRANSFORMERS_WWM], draws=40, seed=3
    ).set_index("strategy")
    transformers = summary.loc[masking_demo.TRANSFORMERS_WWM]
    assert transformers["share_nothing_masked"] + transformers["share_fully_masked"] == pytest.approx(1.0)
    assert transformers["mean_masked_share"] == pytest.approx(transformers["share_fully_masked"])
    chosen, maskable = masking_demo.mask_draws(texts, "wwm", tokenizer=tokenizer, draws=40, seed=3)
    expected = ((chosen & maskable).sum(axis=2) / maskable.sum(axis=1)).mean()
    assert summary.loc["wwm", "mean_masked_share"] == pytest.approx(expected)
    assert summary.loc["wwm", "share_fully_masked"] == 0.0


def test_illustration_masks_whole_words_together(tokenizer):
    table = masking_demo.masking_illustration(TEXT, strategies=["random", "wwm", "kdm"], draws=50, seed=0)
    assert list(table.columns) == ["token", "word", "pos", "random", "wwm", "kdm"]
    assert "".join(table["token"]) == TEXT
    for strategy in ("wwm", "kdm"):  # every token of a word is masked in exactly the same draws
        assert (table.groupby("word", sort=False)[strategy].nunique() == 1).all()
    assert table["random"].groupby(table["word"]).nunique().max() > 1
    # KDM masks entities first: 张伟 (nr), 北京 (ns), 清华大学 (nt) more often than the function word 了
    by_word = table.groupby("word")["kdm"].first()
    assert min(by_word[["张伟", "北京", "清华大学"]]) > by_word["了"]
    fig = masking_heatmap(table, ["random", "wwm", "kdm"])
    assert np.asarray(fig.data[0].z).shape == (3, len(TEXT))


def test_single_draw_blanks_the_budget():
    table = masking_demo.single_draw_masks(TEXT, strategies=["random", "wwm"], seed=4).set_index("strategy")
    assert table.loc["random", "masked"].count(masking_demo.BLANK) == round(0.15 * len(TEXT))
    assert 0 < table.loc["wwm", "masked"].count(masking_demo.BLANK) <= round(0.15 * len(TEXT))
    assert len(table.loc["wwm", "masked"]) == len(TEXT)


# --------------------------------------------------------------------------- correction statistics


def test_synonym_predictions_are_all_corrected(tokenizer):
    rows = 24
    texts = [TEXT] * rows
    model = answer_model(tokenizer, TEXT.replace("美丽", "漂亮"), rows)
    stats = hard_correction.correction_statistics(
        model,
        texts,
        SynonymTable.default(),
        {"strategy": "wwm", "mlm_probability": 0.3},
        tokenizer,
        seed=5,
        level="word",
    )
    chosen, _ = masking_demo.mask_draws(texts, "wwm", {"mlm_probability": 0.3}, tokenizer, draws=1, seed=5)
    positions = word_positions(tokenizer, TEXT, "美丽")
    with_word = int(chosen[0][:, positions].all(axis=1).sum())
    assert 0 < with_word < rows
    assert stats["wrong"] == stats["corrected"] == 2 * with_word
    assert stats["sequences_with_correction"] == with_word and stats["sequences"] == rows
    assert stats["prediction_rate"] == 1.0 and stats["iteration_rate"] == pytest.approx(with_word / rows)
    assert stats["masked"] == int(chosen[0].sum())
    assert stats["synonym_accuracy"] == 1.0
    assert stats["accuracy"] == pytest.approx(1 - 2 * with_word / stats["masked"])
    # the paper's token rule (footnote 5): 美丽 is two character tokens, so nothing is corrected
    token = hard_correction.correction_statistics(
        model, texts, SynonymTable.default(), {"strategy": "wwm", "mlm_probability": 0.3}, tokenizer, seed=5
    )
    assert token["wrong"] == stats["wrong"] and token["masked"] == stats["masked"]
    assert (
        token["corrected"] == 0 and token["prediction_rate"] == 0.0 and token["synonym_accuracy"] == token["accuracy"]
    )
    examples = hard_correction.correction_statistics(
        model,
        texts,
        SynonymTable.default(),
        {"strategy": "wwm", "mlm_probability": 0.3},
        tokenizer,
        seed=5,
        level="word",
        examples=3,
    )["examples"]
    assert len(examples) == 3
    assert (examples["gold"] == "美丽").all() and (examples["predicted"] == "漂亮").all()
    assert (examples["text"] == TEXT).all() and "漂亮" in examples["gold_synonyms"].iloc[0].split()
    for masked_input in examples["masked_input"]:  # positions shift by one for [CLS]
        assert len(masked_input) == len(TEXT) and {masked_input[p - 1] for p in positions} == {masking_demo.BLANK}
    assert hard_correction.correction_statistics(
        model, texts, SynonymTable.default(), {"strategy": "wwm", "mlm_probability": 0.3}, tokenizer, seed=5, examples=3
    )["examples"].empty
    assert "examples" not in token


def test_non_synonym_predictions_are_not_corrected(tokenizer):
    rows = 12
    model = answer_model(tokenizer, TEXT.replace("美丽", "难过"), rows)
    stats = hard_correction.correction_statistics(
        model, [TEXT] * rows, SynonymTable.default(), {"strategy": "kdm", "mlm_probability": 0.5}, tokenizer, seed=0
    )
    assert stats["corrected"] == 0 and stats["prediction_rate"] == 0.0
    assert stats["synonym_accuracy"] == pytest.approx(stats["accuracy"])
    examples = hard_correction.correction_statistics(
        model,
        [TEXT] * rows,
        SynonymTable.default(),
        {"strategy": "kdm", "mlm_probability": 0.5},
        tokenizer,
        examples=10,
    )["examples"]
    assert examples.empty and list(examples.columns) == ["text", "masked_input", "gold", "predicted", "gold_synonyms"]


def test_worked_example_drops_the_synonym_and_reports_the_plain_loss(tokenizer):
    model = answer_model(tokenizer, TEXT.replace("美丽", "漂亮"), 1)
    example = hard_correction.worked_example(
        model, TEXT, "美丽", SynonymTable.default(), tokenizer, top_k=2, level="word"
    )
    assert example["predicted"] == "漂亮" and example["corrected"] and "漂亮" in example["synonyms"]
    assert example["masked_input"] == TEXT.replace("美丽", "[MASK][MASK]")
    vocab = len(tokenizer)
    expected = math.log(math.exp(LOGIT) + vocab - 1)  # CE of a gold token with logit 0 against one logit 5
    assert example["loss_plain"] == pytest.approx(expected, rel=1e-5)
    assert example["loss_hc"] == 0.0
    top = example["candidates"]
    assert len(top) == 4 and list(top[top["rank"] == 1]["token"]) == ["漂", "亮"]
    assert top[top["rank"] == 1]["probability"].iloc[0] == pytest.approx(
        math.exp(LOGIT) / (math.exp(LOGIT) + vocab - 1)
    )
    unrelated = hard_correction.worked_example(
        answer_model(tokenizer, TEXT.replace("美丽", "难过"), 1),
        TEXT,
        "美丽",
        SynonymTable.default(),
        tokenizer,
        level="word",
    )
    assert not unrelated["corrected"] and unrelated["loss_hc"] == pytest.approx(unrelated["loss_plain"])
    token = hard_correction.worked_example(
        model, TEXT, "美丽", SynonymTable.default(), tokenizer, top_k=2
    )  # footnote 5
    assert token["level"] == "token" and token["predicted"] == "漂亮" and not token["corrected"]
    assert token["loss_hc"] == pytest.approx(token["loss_plain"]) == pytest.approx(expected, rel=1e-5)


class FullHead(nn.Module):
    """A masked LM run whole (no known vocabulary head: labelled_logits takes its full logits' masked rows)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, **inputs):
        return self.model(**inputs)


def test_correction_statistics_and_worked_example_match_the_full_head(tokenizer):
    from workbench.models import build_masked_lm

    torch.manual_seed(0)
    model = build_masked_lm(tiny={**TINY, "vocab_size": len(tokenizer)}).double().eval()
    with torch.no_grad():  # the argmax is 巨 everywhere: a masked 大 is corrected
        model.get_output_embeddings().bias[tokenizer.convert_tokens_to_ids("巨")] += 30.0
    text, table = "我大看书，房子大。", SynonymTable.default()  # jieba: 我 大 看书 ， 房子 大 。
    options = {
        "masking": {"strategy": "wwm", "mlm_probability": 0.3},
        "tokenizer": tokenizer,
        "seed": 5,
        "level": "word",
    }
    rows, full = (
        hard_correction.correction_statistics(m, [text] * 8, table, **options) for m in (model, FullHead(model))
    )
    assert rows == full and rows["masked"] > 0 and rows["corrected"] > 0
    rows, full = (
        hard_correction.worked_example(m, text, "大", table, tokenizer, level="word") for m in (model, FullHead(model))
    )
    pd.testing.assert_frame_equal(rows.pop("candidates"), full.pop("candidates"), rtol=0, atol=1e-10)
    for key in ("loss_plain", "loss_hc"):
        assert rows.pop(key) == pytest.approx(full.pop(key), rel=1e-10, abs=1e-12)
    assert rows == full and rows["corrected"] and rows["predicted"] == "巨"


def test_heldout_texts_follow_the_training_texts():
    data = {"source": "sample_corpus", "n_sentences": 30, "max_train_samples": 20, "seed": 7}
    distinct = list(dict.fromkeys(sample_corpus(n_sentences=30, seed=7)))  # each text once, first occurrences
    assert len(distinct) == 28
    assert hard_correction.heldout_texts(data, 8) == distinct[20:]
    with pytest.raises(ValueError, match=r"^data.max_train_samples:"):
        hard_correction.heldout_texts({"source": "sample_corpus", "n_sentences": 30}, 5)
    with pytest.raises(ValueError, match=r"^n_texts:"):
        hard_correction.heldout_texts(data, 9)


# --------------------------------------------------------------------------- grids and summaries


def test_pretraining_and_downstream_grids_run_end_to_end(tmp_path):
    base = {
        "data": {"source": "sample_corpus", "n_sentences": 50, "max_train_samples": 32, "max_length": 32},
        "model": {"tiny": TINY},
        "training": {
            "num_train_epochs": 1,
            "per_device_train_batch_size": 16,
            "learning_rate": 1e-3,
            "quiet": True,
            "logging_steps": 1,
        },
    }
    runs = experiments.pretraining_runs(base, tmp_path / "pre", [("wwm", "plain"), ("wwm", "hc")], seed=1)
    assert list(runs[["masking", "objective"]].itertuples(index=False, name=None)) == [("wwm", "plain"), ("wwm", "hc")]
    plain, hc = runs.iloc[0], runs.iloc[1]
    assert np.isnan(plain["train_prediction_rate"]) and 0.0 <= hc["train_prediction_rate"] <= 1.0
    history = experiments.loss_history(runs)
    assert len(history) == 4 and set(history["step"]) == {1, 2}  # 32 texts / 16 = 2 steps, logged every step
    assert len(pretraining_loss_figure(history).data) == 2
    texts = hard_correction.heldout_texts(base["data"], 16)
    corrections = hard_correction.correction_table(runs, texts, SynonymTable.default(), max_length=32)
    # one row per run and HC level (token: the paper's rule, word: whole words), was one row per run
    assert corrections.shape == (4, 12) and corrections["prediction_rate"].between(0, 1).all()  # 8 counts and rates
    assert list(corrections["level"]) == ["token", "word", "token", "word"]
    assert (corrections.groupby("encoder")["wrong"].nunique() == 1).all()  # same masks and predictions at both levels
    finetune_base = {
        "data": {"source": "sample_relevance", "max_train_samples": 32, "max_eval_samples": 16, "max_length": 32},
        "model": {"tiny": TINY},
        "training": {
            "num_train_epochs": 1,
            "per_device_train_batch_size": 16,
            "per_device_eval_batch_size": 16,
            "learning_rate": 1e-3,
            "quiet": True,
        },
    }
    finetuned = experiments.downstream_grid(
        finetune_base, {"scratch": None, "wwm-hc": hc["output_dir"]}, tmp_path / "ft", seeds=[0]
    )
    assert list(finetuned["encoder"]) == ["scratch", "wwm-hc"]
    assert finetuned["macro_f1"].between(0, 1).all()


def test_downstream_summary_gives_mean_and_sample_std():
    table = pd.DataFrame({"encoder": ["a", "a", "a", "b"], "macro_f1": [0.2, 0.4, 0.9, 0.5], "accuracy": [0.5] * 4})
    summary = experiments.downstream_summary(table).set_index("encoder")
    assert summary.loc["a", "macro_f1_mean"] == pytest.approx(0.5)
    assert summary.loc["a", "macro_f1_std"] == pytest.approx(math.sqrt(((0.3**2) + (0.1**2) + (0.4**2)) / 2))
    assert summary.loc["a", "n"] == 3 and summary.loc["a", "macro_f1"] == "0.500 ± 0.361"
    assert np.isnan(summary.loc["b", "macro_f1_std"]) and summary.loc["b", "macro_f1"] == "0.500"
    fig = downstream_figure(summary.reset_index())
    assert list(fig.data[0].y) == pytest.approx([0.5, 0.5])


# --------------------------------------------------------------------------- bad input


def test_bad_inputs_raise_value_errors_naming_the_parameter(tokenizer, tmp_path):
    with pytest.raises(ValueError, match=r"^strategies:"):
        masking_demo.mask_draws([TEXT], "bert", tokenizer=tokenizer)
    with pytest.raises(ValueError, match=r"^draws:"):
        masking_demo.mask_draws([TEXT], "wwm", tokenizer=tokenizer, draws=0)
    with pytest.raises(ValueError, match=r"^texts:"):
        masking_demo.mask_draws([], "wwm", tokenizer=tokenizer)
    with pytest.raises(ValueError, match=r"^masking.mlm_probability:"):
        masking_demo.mask_draws([TEXT], "wwm", {"mlm_probability": 1.5}, tokenizer)
    with pytest.raises(ValueError, match=r"^strategies:"):
        masking_demo.masking_illustration(TEXT, strategies=[])
    with pytest.raises(ValueError, match=r"^objectives:"):
        experiments.pretraining_runs({}, tmp_path, [("wwm", "dice")])
    with pytest.raises(ValueError, match=r"^masking.strategy:"):
        hard_correction.correction_statistics(
            answer_model(tokenizer, TEXT, 1),
            [TEXT],
            SynonymTable.default(),
            {"strategy": masking_demo.TRANSFORMERS_WWM},
            tokenizer,
        )
    with pytest.raises(ValueError, match=r"^tokenizer:"):
        hard_correction.worked_example(answer_model(tokenizer, TEXT, 1), TEXT, "美丽", SynonymTable.default())
    with pytest.raises(ValueError, match=r"^word:"):
        hard_correction.worked_example(
            answer_model(tokenizer, TEXT, 1), TEXT, "漂亮", SynonymTable.default(), tokenizer
        )
    with pytest.raises(ValueError, match=r"^top_k:"):
        hard_correction.worked_example(
            answer_model(tokenizer, TEXT, 1), TEXT, "美丽", SynonymTable.default(), tokenizer, top_k=0
        )
    with pytest.raises(ValueError, match=r"^encoders:"):
        experiments.downstream_grid({}, {}, tmp_path)
    with pytest.raises(ValueError, match=r"^by/metrics:"):
        experiments.downstream_summary(pd.DataFrame({"a": [1]}))


def test_results_table_joins_pretraining_corrections_and_downstream():
    runs = pd.DataFrame(
        {
            "encoder": ["wwm-plain", "wwm-hc"],
            "masking": ["wwm", "wwm"],
            "objective": ["plain", "hc"],
            "train_loss": [3.0, 2.5],
            "train_prediction_rate": [np.nan, 0.2],
            "output_dir": ["a", "b"],
        }
    )
    corrections = pd.DataFrame(
        {"encoder": ["wwm-plain", "wwm-hc"], "prediction_rate": [0.1, 0.3], "iteration_rate": [0.4, 0.5]}
    )
    finetuned = pd.DataFrame(
        {
            "encoder": ["no_pretraining", "no_pretraining", "wwm-plain", "wwm-plain", "wwm-hc", "wwm-hc"],
            "macro_f1": [0.3, 0.5, 0.6, 0.6, 0.2, 0.4],
            "accuracy": [0.5] * 6,
        }
    )
    results = experiments.results_table(runs, corrections, experiments.downstream_summary(finetuned))
    assert list(results["encoder"]) == ["no_pretraining", "wwm-plain", "wwm-hc"]
    row = results.set_index("encoder").loc["wwm-hc"]
    assert (
        row["heldout_prediction_rate"] == 0.3
        and row["train_prediction_rate"] == 0.2
        and row["macro_f1_mean"] == pytest.approx(0.3)
    )
    assert results.set_index("encoder").loc["no_pretraining"][["masking", "heldout_prediction_rate"]].isna().all()
    metrics = experiments.headline_metrics(results)
    assert experiments.best_encoder(results) == "wwm-plain" and metrics["macro_f1_best"]["mean"] == pytest.approx(0.6)
    assert metrics["macro_f1_no_pretraining"] == {
        "mean": pytest.approx(0.4),
        "std": pytest.approx(math.sqrt(0.02)),
        "n": 2,
    }
    assert metrics["heldout_prediction_rate_mean"] == pytest.approx(0.2)
    assert metrics["train_prediction_rate_hc_mean"] == pytest.approx(0.2)
    with pytest.raises(ValueError, match=r"^baseline:"):
        experiments.headline_metrics(results, baseline="bert")


def test_synonym_sources_are_the_lexicon_embedding_look_up_and_the_extra_lexicons(tokenizer, tmp_path):
    # issue 39: section 6's orchestration in the study; the embedding table is from_embeddings over word_vectors
    from workbench.synonyms import write_lexicon_tsv

    texts, lexicon = sample_corpus(300, seed=0), SynonymTable.default()
    embedding = {"source": "corpus", "k": 3, "threshold": None, "dim": 8, "window": 2, "min_count": 2}
    copy = write_lexicon_tsv(lexicon, tmp_path / "copy.tsv")
    sources = hard_correction.synonym_sources(texts, lexicon, embedding, extra_lexicons={"copy": copy})
    assert list(sources) == ["lexicon", "embedding", "copy"] and sources["lexicon"] is lexicon
    vectors, words = hard_correction.word_vectors(texts, "corpus", dim=8, window=2, min_count=2)
    assert sources["embedding"].groups == SynonymTable.from_embeddings(vectors, words, k=3).groups
    assert set(sources["copy"].groups) == set(lexicon.groups)
    coverage = hard_correction.source_coverage(sources, texts, tokenizer).set_index("source")
    assert list(coverage.index) == ["lexicon", "embedding", "copy"]
    assert coverage.loc["copy", "in_reference"] == 1.0  # the same pairs as the lexicon, the reference
    assert coverage.loc["copy", "pairs"] == coverage.loc["lexicon", "pairs"]


@pytest.mark.parametrize(
    ("embedding", "extra", "match"),
    [
        ({"source": "corpus", "k": 3}, None, r"^embedding: must be a mapping with the keys source, k, threshold"),
        ({**dict.fromkeys(hard_correction.EMBEDDING_OPTIONS, 1), "thresold": 0.3}, None, r"^embedding: .*'thresold'"),
        (dict.fromkeys(hard_correction.EMBEDDING_OPTIONS, 1), ["a.tsv"], r"^extra_lexicons: must be a mapping"),
        (
            dict.fromkeys(hard_correction.EMBEDDING_OPTIONS, 1),
            {"embedding": "a.tsv"},
            r"^extra_lexicons: \['embedding'\]",
        ),
    ],
)
def test_synonym_sources_refuse_a_bad_embedding_or_extra_lexicon_naming_it(embedding, extra, match):
    with pytest.raises(ValueError, match=match):
        hard_correction.synonym_sources(["北京很美丽。"], SynonymTable.default(), embedding, extra_lexicons=extra)
