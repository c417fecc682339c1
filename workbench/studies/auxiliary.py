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

from workbench.checks import check_number, check_seeds, is_int
from workbench.config import Config, load_config
from workbench.evidence import Claim, compare
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
    distinct = all(is_int(n) and n >= 0 for n in num_aux_values) and len(set(num_aux_values)) == len(num_aux_values)
    if not num_aux_values or not distinct:
        raise ValueError(f"num_aux_values: must be a non-empty list of distinct ints >= 0, got {num_aux_values!r}")
    check_seeds("seeds", seeds)
    check_number("fgm_epsilon", fgm_epsilon, 0)
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


AUX_CLAIM = Claim(
    "COLING 2022 (ACL Anthology 2022.coling-1.97)",
    "Figure 3",
    "models can be effectively improved by introducing auxiliary labels",
)
TWO_STAGE_CLAIM = Claim(
    "COLING 2022 (ACL Anthology 2022.coling-1.97)",
    "sec. 4.3 (TNEWS and LCQMC)",
    "introducing auxiliary labels did not significantly improve classification but the two-stage repetitive "
    "operation based on learning similar to human cognitive skills still improved the model’s effectiveness.",
)
CLAIM_METRIC = "accuracy"
"""The paper's metric on TNEWS (Table 3, CLUE's accuracy)."""


def claim_rows(
    runs: pd.DataFrame,
    predictions: Mapping[tuple[str, int, int], tuple[np.ndarray, np.ndarray]],
    test: str,
    setting: str,
    num_labels: int,
    n_resamples: int = 2000,
) -> list[dict[str, Any]]:
    """The results page's rows from :func:`run_study`'s ``runs`` and its ``predictions`` (seeds paired), on test
    accuracy: two-stage training without auxiliary labels (n = 0) against plain fine-tuning (sec. 4.3's "two-stage
    repetitive operation"); every n > 0 of the sweep against plain fine-tuning (Figure 3); the n* chosen on validation
    against n = 0, the auxiliary labels' own effect."""
    golds = [gold for gold, _ in predictions.values()]
    if not golds or any(not np.array_equal(gold, golds[0]) for gold in golds):
        raise ValueError("predictions: must hold every run's labels of one and the same test split")

    def of(method: str, n: int) -> dict[int, np.ndarray]:
        return {seed: pred for (name, aux, seed), (_, pred) in predictions.items() if (name, aux) == (method, n)}

    def row(claim: Claim, method: str, baseline: str, a: dict, b: dict) -> dict[str, Any]:
        return compare(
            claim,
            setting=setting,
            method=method,
            baseline=baseline,
            metric=CLAIM_METRIC,
            y_true=golds[0],
            method_predictions=a,
            baseline_predictions=b,
            test=test,
            num_labels=num_labels,
            n_resamples=n_resamples,
        )

    baseline, label = of(BASELINE, 0), PAPER_NAMES[BASELINE]
    sweep = sorted(int(n) for n in runs.loc[runs["method"] == TWO_STAGE, "num_aux"].unique())
    rows = []
    if 0 in sweep:
        rows.append(row(TWO_STAGE_CLAIM, "two stages, n = 0", label, of(TWO_STAGE, 0), baseline))
    rows += [row(AUX_CLAIM, f"two stages, n = {n}", label, of(TWO_STAGE, n), baseline) for n in sweep if n > 0]
    if 0 in sweep and any(n > 0 for n in sweep):
        chosen = select_num_aux(runs)
        method = f"two stages, n* = {chosen} (chosen on validation)"
        rows.append(row(AUX_CLAIM, method, "two stages, n = 0", of(TWO_STAGE, chosen), of(TWO_STAGE, 0)))
    return rows


def hyperparameters(config: Config) -> dict[str, Any]:
    """What notebook 04 fixes and what it chooses on validation, for the results page (issue 36): the training
    section's optimiser settings (both methods, every n), stage 2's epochs and learning rate, the loss; chosen on
    validation: each stage's epoch and n* (:func:`select_num_aux`)."""
    training = config.training
    record = fixed_hyperparameters(
        {"loss": config.loss},
        {key: getattr(training, key) for key in ("learning_rate", "num_train_epochs", "per_device_train_batch_size")},
        epoch="each stage's epoch with the best validation macro-F1, the same rule for both methods",
        num_aux="n* > 0 with the best mean validation macro-F1 of the two-stage runs (ties: the smaller n)",
    )
    record["fixed"]["stage2"] = {"num_train_epochs": config.aux.stage2_epochs, "learning_rate": config.aux.stage2_lr}
    return record
