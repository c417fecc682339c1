"""Two-stage training with auxiliary labels against plain fine-tuning (notebook 04).

Xu Zhang et al., "Complicate Then Simplify: A Novel Way to Explore Pre-trained Models for Text Classification"
(COLING 2022, ACL Anthology 2022.coling-1.97). Stage 1 trains encoder + a (K+n)-way head with cross-entropy; the n
auxiliary labels never occur as targets ("expanding the target labels by complementary zeros"), so for gold y < K

    L_1 = -log softmax(z)_y = -z_y + log( sum_{j<K} e^{z_j} + sum_{a=K}^{K+n-1} e^{z_a} )

Stage 2 freezes the encoder and fits a fresh K-way head. Methods: :data:`PAPER_NAMES`; the fusion's second encoder is
``aux.fusion_model`` (``workbench.train.fusion_description``). The paper's Na counts all labels: n = Na - Nt.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch.utils.data import DataLoader
from transformers import AutoModelForSequenceClassification, DataCollatorWithPadding

from workbench.checks import check_bool, check_number, check_seeds, is_int
from workbench.config import Config, load_config
from workbench.evidence import N_RESAMPLES, Claim, compare, size
from workbench.label_entropy import softmax_entropy
from workbench.stats import describe, mean_std, row_statistics
from workbench.stats import summarize as summarize_runs
from workbench.train import (
    classification_data,
    evaluation_split,
    finetune,
    fixed_hyperparameters,
    fusion_finetune,
    read_predictions,
    two_stage,
)

BASELINE = "baseline"
TWO_STAGE = "two_stage"
TWO_STAGE_FGM = "two_stage_fgm"
FUSION_FINETUNE = "fusion_finetune"
FUSION = "fusion"
FUSION_FGM = "fusion_fgm"
METHODS = (BASELINE, TWO_STAGE, TWO_STAGE_FGM, FUSION_FINETUNE, FUSION, FUSION_FGM)
PAPER_NAMES = {
    BASELINE: "BERT (fine-tuning)",
    TWO_STAGE: "RE-BERT (two stages)",
    TWO_STAGE_FGM: "RE-BERT + FGM in stage 1",
    FUSION_FINETUNE: "M-BERT (fusion, fine-tuning)",
    FUSION: "MRE-BERT (fusion, two stages)",
    FUSION_FGM: "MRE-BERT-F (fusion, FGM in stage 1)",
}
"""The paper's name of each method (sec. 4.2, Tables 2-4; the workbench's label for the FGM-only variant)."""
FGM_METHODS = (TWO_STAGE_FGM, FUSION_FGM)
FUSION_METHODS = (FUSION_FINETUNE, FUSION, FUSION_FGM)
METRICS = ("macro_f1", "accuracy")
ENTROPY_COLUMNS = ("stage1_entropy_k", "stage1_entropy_k_plus_n", "stage1_aux_mass")
RUN_COLUMNS = (
    "method",
    "num_aux",
    "seed",
    *METRICS,
    "validation_macro_f1",
    "stage1_macro_f1",
    *ENTROPY_COLUMNS,
    "time",
    "num_parameters",
    "train_steps",
)


@torch.no_grad()
def stage_one_entropy(run_dir: str | Path, config: Config, batch_size: int = 128) -> dict[str, float]:
    """Mean over ``config``'s evaluation split of the stage-1 model's (``run_dir/stage1``) K+n logits z (nats; the
    workbench's measurement): H(softmax(z[:K])), H(softmax(z)) and the auxiliary mass sum_{a >= K} softmax(z)_a."""
    model = AutoModelForSequenceClassification.from_pretrained(str(Path(run_dir) / "stage1")).eval()
    data = classification_data(config)
    dataset = data.encoded[evaluation_split(data.encoded)].remove_columns("labels")
    batches = DataLoader(dataset, batch_size=batch_size, collate_fn=DataCollatorWithPadding(data.tokenizer))
    logits = torch.cat([model(**batch).logits.double() for batch in batches])
    k = int(model.config.num_task_labels)
    return {
        "entropy_k": float(np.mean(softmax_entropy(logits[:, :k].numpy()))),
        "entropy_k_plus_n": float(np.mean(softmax_entropy(logits.numpy()))),
        "aux_mass": float(logits.softmax(-1)[:, k:].sum(-1).mean()),
    }


def _run(
    config: Config,
    method: str,
    num_aux: int,
    seed: int,
    output_root: Path,
    fgm_epsilon: float = 0.0,
    predictions: dict | None = None,
) -> dict[str, Any]:
    """Train one (method, n, seed) cell into ``output_root`` and return its table row; ``predictions`` (when given)
    receives the run's (gold, predicted) test labels under (method, n, seed)."""
    run_dir = output_root / f"{method}_n{num_aux}_seed{seed}"
    aux = {
        "num_aux": num_aux,
        "fgm_epsilon": fgm_epsilon if method in FGM_METHODS else 0.0,
        "fusion": method in FUSION_METHODS,
    }
    run_config = config.replace(output_dir=str(run_dir), aux=aux, training={"seed": seed})
    row: dict[str, Any] = {**dict.fromkeys(RUN_COLUMNS, np.nan), "method": method, "num_aux": num_aux, "seed": seed}
    if method in (BASELINE, FUSION_FINETUNE):
        metrics = (finetune if method == BASELINE else fusion_finetune)(run_config.replace(task="finetune")).metrics
        row["validation_macro_f1"] = metrics["best_validation_macro_f1"]
        row["num_parameters"] = (metrics.get("num_parameters") or {}).get("total", np.nan)
        row["train_steps"] = metrics.get("train_steps", np.nan)
    else:
        metrics = two_stage(run_config.replace(task="two_stage")).metrics
        row["validation_macro_f1"] = metrics["stage2"]["best_validation_macro_f1"]
        row["stage1_macro_f1"] = metrics["stage1"]["macro_f1"]
        if method not in FUSION_METHODS and num_aux > 0:
            row.update({f"stage1_{key}": value for key, value in stage_one_entropy(run_dir, run_config).items()})
    if predictions is not None:
        predictions[(method, num_aux, seed)] = read_predictions(run_dir)
    return {**row, "macro_f1": metrics["macro_f1"], "accuracy": metrics["accuracy"], "time": metrics["time"]}


def select_num_aux(runs: pd.DataFrame) -> int:
    """The n > 0 whose ``two_stage`` runs have the best mean validation macro-F1 (ties: the smaller n); never test."""
    candidates = runs[(runs["method"] == TWO_STAGE) & (runs["num_aux"] > 0)]
    if candidates.empty:
        raise ValueError("runs: needs two_stage rows with num_aux > 0 to select n from")
    means = candidates.groupby("num_aux")["validation_macro_f1"].mean()
    return int(means.idxmax())  # the first maximum: num_aux ascending


def check_study_options(num_aux_values: Sequence[int], fgm_epsilon: float, fusion: bool) -> None:
    """:func:`run_study`'s options before any data is read: ``num_aux_values`` a non-empty list of distinct ints >= 0,
    ``fgm_epsilon`` >= 0, a bool ``fusion``; ValueError naming the parameter."""
    listed = isinstance(num_aux_values, list | tuple) and num_aux_values
    distinct = listed and all(is_int(n) and n >= 0 for n in num_aux_values)
    if not distinct or len(set(num_aux_values)) != len(num_aux_values):
        raise ValueError(f"num_aux_values: must be a non-empty list of distinct ints >= 0, got {num_aux_values!r}")
    check_number("fgm_epsilon", fgm_epsilon, 0)
    check_bool("fusion", fusion)


def run_study(
    config: Config | Mapping[str, Any],
    num_aux_values: Sequence[int],
    seeds: Sequence[int],
    fgm_epsilon: float = 0.0,
    fusion: bool = False,
    output_root: str | Path | None = None,
    predictions: dict | None = None,
) -> pd.DataFrame:
    """One row per run (:data:`RUN_COLUMNS`): per seed (``training.seed``) the baseline and ``two_stage`` for each n
    (n = 0: a control), then at n* (:func:`select_num_aux`) the FGM (``fgm_epsilon`` > 0) and ``fusion`` variants.
    Run folders go under ``output_root`` (None: a temporary folder); ``predictions`` (a dict, when given) receives
    each run's (gold, predicted) test labels under (method, n, seed), which the results page pairs by seed."""
    check_study_options(num_aux_values, fgm_epsilon, fusion)
    check_seeds("seeds", seeds)
    config = load_config(config)
    if output_root is None:
        with tempfile.TemporaryDirectory(prefix="aux_study_") as folder:
            return run_study(config, num_aux_values, seeds, fgm_epsilon, fusion, folder, predictions)
    root = Path(output_root)
    rows = [
        _run(config, method, n, seed, root, predictions=predictions)
        for seed in seeds
        for method, n in [(BASELINE, 0), *((TWO_STAGE, n) for n in num_aux_values)]
    ]
    variants = [
        m for m in METHODS[2:] if (m not in FGM_METHODS or fgm_epsilon > 0) and (m not in FUSION_METHODS or fusion)
    ]
    if variants:
        chosen = select_num_aux(pd.DataFrame(rows))
        rows += [
            _run(config, m, 0 if m == FUSION_FINETUNE else chosen, seed, root, fgm_epsilon, predictions)
            for seed in seeds
            for m in variants
        ]
    return pd.DataFrame(rows, columns=list(RUN_COLUMNS))


def summarize(runs: pd.DataFrame, metrics: Sequence[str] = METRICS) -> pd.DataFrame:
    """Per (method, num_aux): ``<metric>_mean``, ``<metric>_std`` (ddof = 1) and ``n``, the methods in
    :data:`METHODS` order."""
    missing = [name for name in ("method", "num_aux", *metrics) if name not in runs.columns]
    if missing:
        raise ValueError(f"runs: missing columns {missing}; expected a run_study table")
    table = summarize_runs(runs, ["method", "num_aux"], metrics).assign(order=lambda t: t["method"].map(METHODS.index))
    return table.sort_values(["order", "num_aux"]).drop(columns="order").reset_index(drop=True)


def headline_metrics(runs: pd.DataFrame) -> dict[str, Any]:
    """metrics.json ``metrics``: ``chosen_num_aux`` (n*), ``<method>_<metric>`` (``{"mean", "std", "n"}``; two-stage at
    n*) and ``delta_macro_f1``, two-stage at n* minus the baseline, paired by seed."""
    summary = summarize(runs)
    chosen = select_num_aux(runs)
    metrics: dict[str, Any] = {"chosen_num_aux": chosen}
    for _, row in summary[(summary["method"] != TWO_STAGE) | (summary["num_aux"] == chosen)].iterrows():
        metrics.update({f"{row['method']}_{metric}": row_statistics(row, metric) for metric in METRICS})
    baseline = runs[runs["method"] == BASELINE].set_index("seed")["macro_f1"]
    two_stage_runs = runs[(runs["method"] == TWO_STAGE) & (runs["num_aux"] == chosen)].set_index("seed")["macro_f1"]
    seeds = baseline.index.intersection(two_stage_runs.index)
    metrics["delta_macro_f1"] = describe(two_stage_runs[seeds] - baseline[seeds])
    return metrics


def this_run(runs: pd.DataFrame) -> str:
    """The run's key numbers in one line (test, mean ± std over seeds), which the notebook's reading quotes."""
    metrics = headline_metrics(runs)

    def cell(key: str) -> str:
        return mean_std(metrics[key]["mean"], metrics[key]["std"])

    scores = runs.groupby(["method", "num_aux"], sort=False)["macro_f1"]
    per_seed = scores.agg(lambda values: "/".join(values.map("{:.3f}".format)))
    control = runs[runs["num_aux"] == 0].pivot_table(index="seed", columns="method", values="macro_f1")
    same = int((control[BASELINE] == control[TWO_STAGE]).sum()) if TWO_STAGE in control else None
    entropy = runs.dropna(subset=["stage1_aux_mass"]).groupby("num_aux")[list(ENTROPY_COLUMNS)].mean()
    return (
        f"This run ({runs['seed'].nunique()} seed(s), test macro-F1): baseline {cell('baseline_macro_f1')}, "
        f"two-stage at n* = {metrics['chosen_num_aux']} (chosen on validation) {cell('two_stage_macro_f1')}, "
        f"difference paired by seed {cell('delta_macro_f1')}. "
        + "".join(f"{PAPER_NAMES[m]} {cell(f'{m}_macro_f1')}. " for m in METHODS[2:] if f"{m}_macro_f1" in metrics)
        + (
            ""
            if same is None
            else f"Two stages at n = 0 gave the baseline's macro-F1 for {same} of {len(control)} seed(s). "
        )
        + "Per seed: "
        + "; ".join(f"{method} n={n}: {values}" for (method, n), values in per_seed.items())
        + ". Stage 1 on the evaluation split (mean over seeds): "
        + "; ".join(
            f"n={n}: auxiliary mass {row['stage1_aux_mass']:.3f}, entropy over K {row['stage1_entropy_k']:.3f} "
            f"and over K+n {row['stage1_entropy_k_plus_n']:.3f} nats"
            for n, row in entropy.iterrows()
        )
        + "."
    )


TWO_STAGE_CLAIM = Claim(
    "COLING 2022 (ACL Anthology 2022.coling-1.97)",
    "sec. 4.3 (TNEWS and LCQMC)",
    "introducing auxiliary labels did not significantly improve classification but the two-stage repetitive "
    "operation based on learning similar to human cognitive skills still improved the model’s effectiveness.",
)
TWO_STAGE_DIFFERENCES = (56.87 - 56.09, 57.40 - 56.77)
"""Table 3, TNEWS (validation accuracy): RE-BERT over BERT and RE-BERTo over BERTo; Table 1 gives both TNEWS runs as
many labels as targets (Na = Nt), two stages without auxiliary labels."""
CLAIM_METRIC = "accuracy"
"""The paper's metric on TNEWS (Table 3, CLUE's accuracy)."""
PAPER_SCALE = {
    "model": "BERT-wwm, BERT-wwm-ext and their fusion (MRE-BERT), pre-trained (Table 3)",
    "parameters": "about 110 M per BERT-base (model cards)",
    "training examples": "TNEWS as Table 1 prints it",
}
"""The paper's scale beside this run's on the results page. Figure 3 ("models can be effectively improved by
introducing auxiliary labels") is about KBQA, and for TNEWS sec. 4.3 says auxiliary labels did not help: no row
claims a gain from auxiliary labels on TNEWS."""


def claim_rows(
    runs: pd.DataFrame,
    predictions: Mapping[tuple[str, int, int], tuple[np.ndarray, np.ndarray]],
    test: str,
    setting: str,
    num_labels: int,
    train_counts: Sequence[int],
    n_resamples: int = N_RESAMPLES,
) -> list[dict[str, Any]]:
    """The results page's row from :func:`run_study`'s ``runs`` and its ``predictions`` (seeds paired), on test
    accuracy: two-stage training without auxiliary labels (n = 0) against plain fine-tuning (sec. 4.3's "two-stage
    repetitive operation"), beside Table 3's differences. ``train_counts``: the training split's label counts (the
    trivial baseline's prior)."""
    golds = [gold for gold, _ in predictions.values()]
    if not golds or any(not np.array_equal(gold, golds[0]) for gold in golds):
        raise ValueError("predictions: must hold every run's labels of one and the same test split")

    def of(method: str, n: int) -> dict[int, np.ndarray]:
        return {seed: pred for (name, aux, seed), (_, pred) in predictions.items() if (name, aux) == (method, n)}

    sweep = sorted(int(n) for n in runs.loc[runs["method"] == TWO_STAGE, "num_aux"].unique())
    if 0 not in sweep:
        return []
    return [
        compare(
            TWO_STAGE_CLAIM,
            setting=setting,
            method="two stages, n = 0",
            baseline=PAPER_NAMES[BASELINE],
            metric=CLAIM_METRIC,
            y_true=golds[0],
            method_predictions=of(TWO_STAGE, 0),
            baseline_predictions=of(BASELINE, 0),
            test=test,
            num_labels=num_labels,
            train_counts=train_counts,
            paper_difference=TWO_STAGE_DIFFERENCES,
            paper_basis="Table 3, TNEWS validation accuracy: RE-BERT over BERT, RE-BERTo over BERTo",
            n_resamples=n_resamples,
        )
    ]


def sizes(runs: pd.DataFrame, training_examples: int) -> list[dict[str, Any]]:
    """The scale table's line: the fine-tuned baseline's parameters and optimizer steps (its first run)."""
    baseline = runs[(runs["method"] == BASELINE) & runs["num_parameters"].notna()]
    if baseline.empty:
        return []
    first = baseline.iloc[0]
    return [size(PAPER_NAMES[BASELINE], int(first["num_parameters"]), training_examples, int(first["train_steps"]))]


def hyperparameters(config: Config) -> dict[str, Any]:
    """What notebook 04 fixes and what it chooses on validation, for the results page (issue 36): ``fixed``, the
    training section's optimiser settings (the baseline and stage 1, every n) and stage 2's epochs and learning rate
    (``workbench.train.fixed_hyperparameters``); ``chosen`` on validation: each stage's epoch."""
    training = config.training
    stage2 = {
        "stage 2 epochs": config.aux.stage2_epochs or training.num_train_epochs,
        "stage 2 learning rate": config.aux.stage2_lr or training.learning_rate,
    }
    return {
        "fixed": fixed_hyperparameters(training, **stage2),
        "chosen": {"epoch": "each stage's epoch with the best validation macro-F1, the same rule for both methods"},
    }
