"""The auxiliary-label study (workbench.studies.auxiliary) on tiny settings: grid, selection, aggregation, entropy
and figure."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch
from safetensors.torch import load_file
from transformers import AutoModelForSequenceClassification

from workbench.data import sample_relevance_splits
from workbench.studies.auxiliary import (
    BASELINE,
    FUSION,
    FUSION_FGM,
    FUSION_FINETUNE,
    METHODS,
    PAPER_NAMES,
    RUN_COLUMNS,
    TWO_STAGE,
    TWO_STAGE_FGM,
    headline_metrics,
    run_study,
    select_num_aux,
    stage_one_entropy,
    summarize,
    this_run,
)
from workbench.train import classification_data, fusion_description, load_config
from workbench.train.two_stage_training import FGM, fusion_encoders, stage_one_model
from workbench.viz import aux_sweep_figure
from workbench.vocab import load_tokenizer

K = 3  # sample_relevance labels


def tiny_config():
    return load_config(
        {
            "data": {"source": "sample_relevance", "max_train_samples": 32, "max_eval_samples": 16, "max_length": 24},
            "model": {"tiny": {"num_layers": 1, "hidden_size": 16, "num_heads": 2}},
            "training": {
                "num_train_epochs": 1,
                "per_device_train_batch_size": 16,
                "learning_rate": 1e-3,
                "quiet": True,
            },
        }
    )


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """Tiny models train several times faster on one thread on the shared 2-core machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def grid(tmp_path_factory, one_torch_thread):
    root = tmp_path_factory.mktemp("aux_grid")
    return root, run_study(tiny_config(), num_aux_values=[0, 2], seeds=[0, 1], output_root=root)


def test_grid_has_baseline_and_every_n_for_every_seed(grid):
    _, runs = grid
    assert list(runs.columns) == list(RUN_COLUMNS)
    assert list(zip(runs["method"], runs["num_aux"], runs["seed"])) == [
        (BASELINE, 0, 0),
        (TWO_STAGE, 0, 0),
        (TWO_STAGE, 2, 0),
        (BASELINE, 0, 1),
        (TWO_STAGE, 0, 1),
        (TWO_STAGE, 2, 1),
    ]
    assert runs[["macro_f1", "accuracy", "validation_macro_f1"]].apply(lambda c: c.between(0, 1)).all().all()
    baseline = runs[runs["method"] == BASELINE]
    assert baseline[["stage1_macro_f1", "stage1_entropy_k"]].isna().all().all()
    assert runs.loc[runs["method"] == TWO_STAGE, "stage1_macro_f1"].notna().all()
    # entropy is measured only where there are auxiliary outputs, and is bounded by the uniform entropy (eq. 3)
    with_aux = runs[runs["num_aux"] == 2]
    assert (with_aux["stage1_entropy_k"].between(0, math.log(K))).all()
    assert (with_aux["stage1_entropy_k_plus_n"].between(0, math.log(K + 2))).all()
    assert (with_aux["stage1_aux_mass"].between(0, 1)).all()
    assert runs.loc[(runs["method"] == TWO_STAGE) & (runs["num_aux"] == 0), "stage1_entropy_k"].isna().all()


def test_same_seed_reproduces_the_runs(grid, tmp_path):
    _, runs = grid
    again = run_study(tiny_config(), num_aux_values=[2], seeds=[1], output_root=tmp_path)
    first = runs[(runs["seed"] == 1) & (runs["num_aux"] == 2) | (runs["seed"] == 1) & (runs["method"] == BASELINE)]
    columns = [c for c in RUN_COLUMNS if c != "time"]
    pd.testing.assert_frame_equal(first[columns].reset_index(drop=True), again[columns], rtol=1e-6)


def test_stage_one_entropy_matches_a_float64_recomputation(grid):
    root, _ = grid
    run_dir = root / "two_stage_n2_seed0"
    config = tiny_config()
    measured = stage_one_entropy(run_dir, config, batch_size=5)  # uneven batches: padding must not change logits
    model = AutoModelForSequenceClassification.from_pretrained(str(run_dir / "stage1")).eval()
    test = sample_relevance_splits(seed=0)["test"].select(range(16))
    inputs = load_tokenizer()(
        list(test["text"]), list(test["text_pair"]), truncation=True, max_length=24, padding=True, return_tensors="pt"
    )
    with torch.no_grad():
        z = model(**inputs).logits.double()
    p_all, p_task = torch.softmax(z, -1), torch.softmax(z[:, :K], -1)
    expected_k = float(-(p_task * p_task.log()).sum(-1).mean())
    expected_all = float(-(p_all * p_all.log()).sum(-1).mean())
    assert measured["entropy_k"] == pytest.approx(expected_k, abs=1e-5)
    assert measured["entropy_k_plus_n"] == pytest.approx(expected_all, abs=1e-5)
    assert measured["aux_mass"] == pytest.approx(float(p_all[:, K:].sum(-1).mean()), abs=1e-6)


def test_fgm_and_fusion_variants_run_at_the_n_chosen_on_validation(tmp_path):
    runs = run_study(
        tiny_config(), num_aux_values=[1, 2], seeds=[0], fgm_epsilon=0.5, fusion=True, output_root=tmp_path
    )
    chosen = select_num_aux(runs[runs["method"].isin([BASELINE, TWO_STAGE])])
    variants = runs[runs["method"].isin([TWO_STAGE_FGM, FUSION])]
    assert list(variants["method"]) == [TWO_STAGE_FGM, FUSION]
    assert (variants["num_aux"] == chosen).all()
    assert variants["stage1_macro_f1"].notna().all()
    assert variants.loc[variants["method"] == FUSION, "stage1_entropy_k"].isna().all()
    assert (tmp_path / f"two_stage_fgm_n{chosen}_seed0" / "stage2").is_dir()
    # the paper's M-BERT (fusion, one stage, no auxiliary labels) and MRE-BERT-F (fusion + FGM in stage 1)
    assert list(runs["method"])[-4:] == [TWO_STAGE_FGM, FUSION_FINETUNE, FUSION, FUSION_FGM]
    rows = runs.set_index("method")
    assert rows.loc[FUSION_FINETUNE, "num_aux"] == 0 and np.isnan(rows.loc[FUSION_FINETUNE, "stage1_macro_f1"])
    assert rows.loc[FUSION_FGM, "num_aux"] == chosen and not np.isnan(rows.loc[FUSION_FGM, "stage1_macro_f1"])
    m_bert = load_file(str(tmp_path / "fusion_finetune_n0_seed0" / "model.safetensors"))
    assert m_bert["classifier.weight"].shape == (K, 2 * 16)  # K outputs only, over both encoders' [CLS]
    assert any(name.startswith("encoder_a.") for name in m_bert) and any(
        name.startswith("encoder_b.") for name in m_bert
    )
    mre_f = json.loads((tmp_path / f"fusion_fgm_n{chosen}_seed0" / "metrics.json").read_text())["parameters"]["aux"]
    assert (mre_f["fusion"], mre_f["fgm_epsilon"], mre_f["num_aux"]) == (True, 0.5, chosen)
    assert (
        load_file(str(tmp_path / f"fusion_fgm_n{chosen}_seed0" / "stage1" / "model.safetensors"))[
            "classifier.weight"
        ].shape[0]
        == K + chosen
    )


def test_fusion_without_fgm_runs_m_bert_and_mre_but_no_mre_f(tmp_path):
    runs = run_study(tiny_config(), num_aux_values=[1], seeds=[0], fusion=True, output_root=tmp_path / "a")
    assert list(runs["method"]) == [BASELINE, TWO_STAGE, FUSION_FINETUNE, FUSION]


def test_mre_f_runs_fgm_on_both_encoders():
    config = tiny_config().replace(aux={"fusion": True, "num_aux": 2, "fgm_epsilon": 0.5})
    data = classification_data(config)
    torch.manual_seed(0)
    model = stage_one_model(config, data.tokenizer, K)
    fgm = FGM(model, 0.5)
    embeddings = [model.encoder_a.embeddings.word_embeddings.weight, model.encoder_b.embeddings.word_embeddings.weight]
    assert len(fgm.parameters) == 2 and all(any(p is e for p in fgm.parameters) for e in embeddings)
    batch = {
        key: torch.nn.utils.rnn.pad_sequence(
            [torch.tensor(v) for v in data.encoded["train"][:8][key]], batch_first=True
        )
        for key in ("input_ids", "attention_mask", "token_type_ids")
    }
    labels = torch.tensor(data.encoded["train"][:8]["labels"])
    torch.nn.functional.cross_entropy(model(**batch).logits, labels).backward()
    before = [e.detach().clone() for e in embeddings]
    fgm.attack()
    for weight, saved in zip(embeddings, before):  # each encoder moved by epsilon along its own gradient
        assert torch.linalg.vector_norm(weight.detach() - saved).item() == pytest.approx(0.5, rel=1e-4)
    fgm.restore()
    for weight, saved in zip(embeddings, before):
        assert torch.equal(weight.detach(), saved)


def _checkpoint(folder, vocab_file=None):
    from transformers import BertModel

    from workbench.models import tiny_bert_config

    tokenizer = load_tokenizer(vocab_file=vocab_file)
    BertModel(tiny_bert_config(vocab_size=len(tokenizer), num_layers=1, hidden_size=16, num_heads=2)).save_pretrained(
        folder
    )
    tokenizer.save_pretrained(folder)
    return folder


def test_fusion_model_is_the_second_encoder_and_must_share_the_tokenizer(tmp_path):
    second = _checkpoint(tmp_path / "second")
    config = tiny_config().replace(aux={"fusion": True, "fusion_model": str(second)})
    tokenizer = load_tokenizer()
    encoder_a, encoder_b = fusion_encoders(config, tokenizer)
    saved = load_file(str(second / "model.safetensors"))
    key = next(name for name in saved if name.endswith("word_embeddings.weight"))
    torch.testing.assert_close(encoder_b.embeddings.word_embeddings.weight.detach(), saved[key])
    assert not torch.equal(encoder_a.embeddings.word_embeddings.weight.detach(), saved[key])
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "的", "是"]), encoding="utf-8")
    other = _checkpoint(tmp_path / "other", vocab_file=vocab)
    with pytest.raises(ValueError, match=r"^aux.fusion_model:"):
        fusion_encoders(tiny_config().replace(aux={"fusion": True, "fusion_model": str(other)}), tokenizer)


def test_describe_fusion_names_the_fallback(tmp_path):
    assert "a second tiny BERT of the same size" in fusion_description(tiny_config())
    checkpoint = tiny_config().replace(model={"model_name_or_path": "ckpt"})
    assert (
        fusion_description(checkpoint)
        == "ckpt + the same checkpoint again (aux.fusion_model is null: identical weights at the start)"
    )
    assert fusion_description(checkpoint.replace(aux={"fusion_model": "other"})) == "ckpt + other"
    assert list(PAPER_NAMES) == list(METHODS) and PAPER_NAMES[FUSION_FINETUNE].startswith("M-BERT")


def test_select_num_aux_uses_mean_validation_score_and_breaks_ties_low():
    runs = pd.DataFrame(
        {
            "method": [TWO_STAGE] * 6 + [BASELINE],
            "num_aux": [0, 0, 2, 2, 4, 4, 0],
            "validation_macro_f1": [0.99, 0.99, 0.6, 0.8, 0.9, 0.5, 1.0],
            "macro_f1": [0.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0],  # test scores must not matter
        }
    )
    assert select_num_aux(runs) == 2  # n=0 and the baseline are not candidates; 0.7 == 0.7: the smaller n
    with pytest.raises(ValueError, match=r"^runs:"):
        select_num_aux(runs[runs["num_aux"] == 0])


def test_summarize_gives_mean_sample_std_and_count_in_method_order():
    runs = pd.DataFrame(
        {
            "method": [TWO_STAGE, BASELINE, TWO_STAGE, BASELINE, TWO_STAGE, FUSION],
            "num_aux": [4, 0, 4, 0, 4, 4],
            "macro_f1": [0.5, 0.7, 0.6, 0.9, 0.8, 0.4],
            "accuracy": [0.6, 0.8, 0.7, 1.0, 0.9, 0.5],
        }
    )
    table = summarize(runs)
    assert list(table["method"]) == [BASELINE, TWO_STAGE, FUSION]
    assert list(table.columns) == [
        "method",
        "num_aux",
        "macro_f1_mean",
        "macro_f1_std",
        "accuracy_mean",
        "accuracy_std",
        "n",
    ]
    values = np.array([0.5, 0.6, 0.8])
    row = table[table["method"] == TWO_STAGE].iloc[0]
    assert row["macro_f1_mean"] == pytest.approx(values.mean())
    assert row["macro_f1_std"] == pytest.approx(math.sqrt(((values - values.mean()) ** 2).sum() / 2))
    assert row["n"] == 3
    baseline = table[table["method"] == BASELINE].iloc[0]
    assert baseline["accuracy_mean"] == pytest.approx(0.9) and baseline["accuracy_std"] == pytest.approx(
        math.sqrt(0.02)
    )
    assert math.isnan(table[table["method"] == FUSION].iloc[0]["macro_f1_std"])  # one seed: no spread
    with pytest.raises(ValueError, match=r"^runs:"):
        summarize(runs.drop(columns="accuracy"))


def test_sweep_figure_plots_the_two_stage_curve_variants_and_baseline_band():
    summary = pd.DataFrame(
        {
            "method": [BASELINE, TWO_STAGE, TWO_STAGE, TWO_STAGE_FGM],
            "num_aux": [0, 0, 3, 3],
            "accuracy_mean": [0.8, 0.7, 0.75, 0.77],
            "accuracy_std": [0.02, 0.01, np.nan, 0.03],
        }
    )
    fig = aux_sweep_figure(summary, "accuracy")
    assert [trace.name for trace in fig.data] == ["two-stage (stage 2, frozen encoder)", TWO_STAGE_FGM]
    assert list(fig.data[0].x) == [0, 3] and list(fig.data[0].error_y.array) == [0.01, 0.0]
    band = [shape for shape in fig.layout.shapes if shape.type == "rect"][0]
    assert (band.y0, band.y1) == pytest.approx((0.78, 0.82))
    with pytest.raises(ValueError, match=r"^metric:"):
        aux_sweep_figure(summary, "f1")
    labelled = aux_sweep_figure(summary, "accuracy", method_labels=PAPER_NAMES)
    assert [trace.name for trace in labelled.data] == [
        "two-stage (stage 2, frozen encoder)",
        "RE-BERT + FGM in stage 1",
    ]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_aux_values": [], "seeds": [0]}, r"^num_aux_values:"),
        ({"num_aux_values": [-1], "seeds": [0]}, r"^num_aux_values:"),
        ({"num_aux_values": [2, 2], "seeds": [0]}, r"^num_aux_values:"),
        ({"num_aux_values": [2], "seeds": []}, r"^seeds:"),
        ({"num_aux_values": [2], "seeds": [0, 0]}, r"^seeds:"),
        ({"num_aux_values": [2], "seeds": [0], "fgm_epsilon": -0.1}, r"^fgm_epsilon:"),
    ],
)
def test_bad_grid_is_rejected_before_training(kwargs, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        run_study(tiny_config(), output_root=tmp_path, **kwargs)
    assert not any(tmp_path.iterdir())


def test_headline_metrics_compare_baseline_with_two_stage_at_the_chosen_n():
    runs = pd.DataFrame(
        {
            "method": [BASELINE, BASELINE, TWO_STAGE, TWO_STAGE, TWO_STAGE, TWO_STAGE],
            "num_aux": [0, 0, 2, 2, 4, 4],
            "seed": [0, 1, 0, 1, 0, 1],
            "macro_f1": [0.6, 0.8, 0.5, 0.7, 0.9, 0.7],
            "accuracy": [0.7, 0.9, 0.6, 0.8, 0.95, 0.85],
            "validation_macro_f1": [0.9, 0.9, 0.4, 0.5, 0.6, 0.7],
        }
    )
    metrics = headline_metrics(runs)
    assert metrics["chosen_num_aux"] == 4
    assert metrics["baseline_macro_f1"]["mean"] == pytest.approx(0.7) and metrics["two_stage_macro_f1"][
        "mean"
    ] == pytest.approx(0.8)
    assert metrics["two_stage_accuracy"]["mean"] == pytest.approx(0.9)
    assert (
        metrics["baseline_macro_f1"]["std"] == pytest.approx(math.sqrt(0.02)) and metrics["baseline_macro_f1"]["n"] == 2
    )
    # paired by seed: (0.9 - 0.6, 0.7 - 0.8) = (0.3, -0.1)
    assert metrics["delta_macro_f1"] == {"mean": pytest.approx(0.1), "std": pytest.approx(math.sqrt(0.08)), "n": 2}
    assert not any(key.startswith(("fusion", "two_stage_fgm")) for key in metrics)  # variants only when they ran
    with_variants = pd.concat(
        [
            runs,
            pd.DataFrame(
                {
                    "method": [FUSION_FINETUNE, FUSION_FINETUNE, FUSION_FGM],
                    "num_aux": [0, 0, 4],
                    "seed": [0, 1, 0],
                    "macro_f1": [0.5, 0.7, 0.9],
                    "accuracy": [0.6, 0.8, 0.9],
                    "validation_macro_f1": [0.1, 0.1, 0.1],
                }
            ),
        ]
    )
    metrics = headline_metrics(with_variants)
    assert (
        metrics["fusion_finetune_macro_f1"]["mean"] == pytest.approx(0.6)
        and metrics["fusion_finetune_macro_f1"]["n"] == 2
    )
    assert metrics["fusion_fgm_accuracy"]["mean"] == pytest.approx(0.9) and metrics["chosen_num_aux"] == 4


def test_this_run_quotes_the_grid(grid):
    _, runs = grid
    metrics = headline_metrics(runs)
    line = this_run(runs)
    baseline = runs[runs["method"] == BASELINE]["macro_f1"]
    assert line.startswith(
        f"This run (2 seed(s), test macro-F1): baseline {baseline.mean():.3f} ± {baseline.std():.3f}, "
    )
    assert f"two-stage at n* = {metrics['chosen_num_aux']} (chosen on validation)" in line
    two_stage_zero = runs[(runs["method"] == TWO_STAGE) & (runs["num_aux"] == 0)]["macro_f1"].to_numpy()
    same = int((two_stage_zero == baseline.to_numpy()).sum())
    assert f"Two stages at n = 0 gave the baseline's macro-F1 for {same} of 2 seed(s)" in line
    mass = runs[runs["num_aux"] == 2]["stage1_aux_mass"].mean()
    assert f"n=2: auxiliary mass {mass:.3f}" in line and "n=0: auxiliary" not in line
