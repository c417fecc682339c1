"""Auxiliary-label study: plain fine-tuning vs two-stage training with n auxiliary labels.

Xu Zhang et al., "Complicate Then Simplify: A Novel Way to Explore Pre-trained
Models for Text Classification" (COLING 2022). Stage 1 (the paper's "pre-training
stage") trains encoder + a (K+n)-way head with cross-entropy; the n auxiliary
labels never occur as targets ("expanding the target labels by complementary
zeros"), so with logits z over K+n outputs and gold label y < K the loss is

    L_1 = -log softmax(z)_y = -z_y + log( sum_{j<K} e^{z_j} + sum_{a=K}^{K+n-1} e^{z_a} )

Stage 2 (the "fine-tuning stage") freezes the encoder and fits a fresh K-way head.

Methods (:data:`METHODS`; the paper's names in :data:`PAPER_NAMES`):

* ``baseline`` (BERT): plain fine-tuning of ``model`` with a K-way head;
* ``two_stage`` (RE-BERT): the two stages on ``model`` for each n;
* ``two_stage_fgm`` (RE-BERT with FGM): FGM adversarial training in stage 1, at n*;
* ``fusion_finetune`` (M-BERT): the fusion of ``model`` and ``aux.fusion_model``
  fine-tuned in one stage, no auxiliary labels ("M-BERT unites the textual
  semantic representations of two pre-trained models");
* ``fusion`` (MRE-BERT): the two stages on that fusion, at n* ("MRE-BERT fuses the
  textual representations of the BERT-wwm and the BERT-wwm-ext models and then
  introduces our approach");
* ``fusion_fgm`` (MRE-BERT-F, "MRE-BERT with adversarial perturbation"): MRE with
  FGM in stage 1 on both encoders' word embeddings, at n*.

n is the number of auxiliary labels; the paper's Table 1 gives Na, "the whole
number of auxiliary and target labels", so n = Na - Nt. n* is chosen on
validation among the single-encoder two-stage runs and reused by every variant
(the paper tunes Na per model: ChnSentiCorp Na = 4 for RE-BERT, 16 for MRE-BERT).
The fusion's second encoder is ``aux.fusion_model``; when it is null the fallback
is a second tiny BERT of the same size with its own initialisation, or the same
checkpoint loaded twice (``workbench.train.two_stage_training.fusion_description``):
not the paper's two different encoders.

The functions here run the grid the notebook 04_auxiliary_labels shows (its figure,
in the spirit of the paper's Figure 3, is ``workbench.viz.aux_sweep_figure``):

* :func:`run_study` -- baseline (``finetune``, CE) and ``two_stage`` for each n,
  over seeds; optional FGM / fusion variants at the n chosen on validation;
* :func:`select_num_aux` -- that choice (best mean validation macro-F1, n > 0);
* :func:`summarize` -- mean, sample std (ddof=1) and n per method and n;
* :func:`stage_one_entropy` -- the stage-1 model's mean output entropy over K
  and over K+n outputs on the evaluation split (a measurement of the workbench,
  not the paper's eq. 2-3, which assume every false label has probability gamma).
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from transformers import AutoModelForSequenceClassification, DataCollatorWithPadding

from workbench.checks import check_number, check_seeds
from workbench.config import Config, load_config
from workbench.information import softmax_entropy
from workbench.stats import describe, row_statistics
from workbench.stats import summarize as summarize_runs
from workbench.train import classification_data, evaluation_split, finetune, fusion_description, fusion_finetune, two_stage

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
"""The paper's name of each method (sec. 4.2, Tables 2-4; the workbench's labels for the FGM-only variant)."""
FGM_METHODS = (TWO_STAGE_FGM, FUSION_FGM)
FUSION_METHODS = (FUSION_FINETUNE, FUSION, FUSION_FGM)
METRICS = ("macro_f1", "accuracy")
RUN_COLUMNS = (
    "method",
    "num_aux",
    "seed",
    "macro_f1",
    "accuracy",
    "validation_macro_f1",
    "stage1_macro_f1",
    "stage1_entropy_k",
    "stage1_entropy_k_plus_n",
    "stage1_aux_mass",
    "time",
)


def _check_grid(num_aux_values: Sequence[int], seeds: Sequence[int]) -> None:
    if not num_aux_values or any(isinstance(n, bool) or not isinstance(n, int) or n < 0 for n in num_aux_values):
        raise ValueError(f"num_aux_values: must be a non-empty list of ints >= 0, got {num_aux_values!r}")
    if len(set(num_aux_values)) != len(num_aux_values):
        raise ValueError(f"num_aux_values: must not repeat a value, got {num_aux_values!r}")
    check_seeds("seeds", seeds)


@torch.no_grad()
def stage_one_entropy(run_dir: str | Path, config: Config, batch_size: int = 128) -> dict[str, float]:
    """Mean entropies (nats) of the stage-1 model in ``run_dir/stage1`` over ``config``'s evaluation split.

    With z the K+n logits of one example (``workbench.information``, eq. 2):
    ``entropy_k`` = mean H(softmax(z[:K])), ``entropy_k_plus_n`` = mean H(softmax(z)),
    ``aux_mass`` = mean sum_{a >= K} softmax(z)_a, the probability the model
    leaves on the auxiliary outputs.
    """
    model = AutoModelForSequenceClassification.from_pretrained(str(Path(run_dir) / "stage1")).eval()
    data = classification_data(config)
    num_labels = int(model.config.num_task_labels)
    dataset = data.encoded[evaluation_split(data.encoded)].remove_columns("labels")
    collate = DataCollatorWithPadding(data.tokenizer)
    logits = np.concatenate(
        [
            model(**collate([dataset[i] for i in range(start, min(start + batch_size, len(dataset)))])).logits.double().numpy()
            for start in range(0, len(dataset), batch_size)
        ]
    )
    probabilities = torch.softmax(torch.as_tensor(logits), dim=-1).numpy()
    return {
        "entropy_k": float(np.mean(softmax_entropy(logits[:, :num_labels]))),
        "entropy_k_plus_n": float(np.mean(softmax_entropy(logits))),
        "aux_mass": float(probabilities[:, num_labels:].sum(axis=-1).mean()),
    }


def _run(config: Config, method: str, num_aux: int, seed: int, output_root: Path, fgm_epsilon: float = 0.0) -> dict[str, Any]:
    """Train one (method, n, seed) cell into ``output_root`` and return its table row."""
    run_dir = output_root / f"{method}_n{num_aux}_seed{seed}"
    aux = {"num_aux": num_aux, "fgm_epsilon": fgm_epsilon if method in FGM_METHODS else 0.0, "fusion": method in FUSION_METHODS}
    run_config = config.replace(output_dir=str(run_dir), aux=aux, training={"seed": seed})
    row: dict[str, Any] = dict.fromkeys(RUN_COLUMNS, np.nan)
    row.update(method=method, num_aux=num_aux, seed=seed)
    if method in (BASELINE, FUSION_FINETUNE):
        train = finetune if method == BASELINE else fusion_finetune
        metrics = train(run_config.replace(task="finetune")).metrics
        row["validation_macro_f1"] = metrics["best_validation_macro_f1"]
    else:
        metrics = two_stage(run_config.replace(task="two_stage")).metrics
        row["validation_macro_f1"] = metrics["stage2"]["best_validation_macro_f1"]
        row["stage1_macro_f1"] = metrics["stage1"]["macro_f1"]
        if method not in FUSION_METHODS and num_aux > 0:
            entropy = stage_one_entropy(run_dir, run_config)
            row.update(
                stage1_entropy_k=entropy["entropy_k"],
                stage1_entropy_k_plus_n=entropy["entropy_k_plus_n"],
                stage1_aux_mass=entropy["aux_mass"],
            )
    row.update(macro_f1=metrics["macro_f1"], accuracy=metrics["accuracy"], time=metrics["time"])
    return row


def select_num_aux(runs: pd.DataFrame) -> int:
    """The n > 0 whose ``two_stage`` runs have the best mean validation macro-F1 (ties: the smaller n).

    Selection uses validation scores only, never the test split.
    """
    candidates = runs[(runs["method"] == TWO_STAGE) & (runs["num_aux"] > 0)]
    if candidates.empty:
        raise ValueError("runs: needs two_stage rows with num_aux > 0 to select n from")
    means = candidates.groupby("num_aux")["validation_macro_f1"].mean()
    return int(means[means == means.max()].index.min())


def run_study(
    config: Config | Mapping[str, Any],
    num_aux_values: Sequence[int],
    seeds: Sequence[int],
    fgm_epsilon: float = 0.0,
    fusion: bool = False,
    output_root: str | Path | None = None,
) -> pd.DataFrame:
    """Train the grid and return one row per run (columns :data:`RUN_COLUMNS`).

    For every seed: the baseline (``finetune`` with CE, ``num_aux`` = 0) and
    ``two_stage`` for each n in ``num_aux_values`` (n = 0 is two-stage training
    without auxiliary labels: it isolates the effect of the extra outputs).
    Then, at n* = :func:`select_num_aux` (validation): ``two_stage_fgm`` when
    ``fgm_epsilon`` > 0; with ``fusion``, ``fusion_finetune`` (M-BERT, n = 0),
    ``fusion`` (MRE-BERT) and, when ``fgm_epsilon`` > 0 too, ``fusion_fgm``
    (MRE-BERT-F). The fusion's second encoder is ``config.aux.fusion_model``.
    ``config`` is a trainer config (its ``data``, ``model``, ``loss``, ``aux`` stage-2 settings
    and ``training`` are used); the seed goes to ``training.seed`` (the data split stays
    ``data.seed``). Run folders go under ``output_root`` (a temporary folder, deleted
    afterwards, when None).
    """
    _check_grid(list(num_aux_values), list(seeds))
    check_number("fgm_epsilon", fgm_epsilon, 0)
    config = load_config(config)
    if output_root is None:
        with tempfile.TemporaryDirectory(prefix="aux_study_") as folder:
            return run_study(config, num_aux_values, seeds, fgm_epsilon, fusion, folder)
    root = Path(output_root)
    grid = [(BASELINE, 0)] + [(TWO_STAGE, n) for n in num_aux_values]
    rows = [_run(config, method, n, seed, root) for seed in seeds for method, n in grid]
    variants = ([TWO_STAGE_FGM] if fgm_epsilon > 0 else []) + ([FUSION_FINETUNE, FUSION] if fusion else [])
    variants += [FUSION_FGM] if fusion and fgm_epsilon > 0 else []
    if variants:
        chosen = select_num_aux(pd.DataFrame(rows))
        rows += [
            _run(config, method, 0 if method == FUSION_FINETUNE else chosen, seed, root, float(fgm_epsilon))
            for seed in seeds
            for method in variants
        ]
    return pd.DataFrame(rows, columns=list(RUN_COLUMNS))


def summarize(runs: pd.DataFrame, metrics: Sequence[str] = METRICS) -> pd.DataFrame:
    """Per (method, num_aux): ``<metric>_mean``, ``<metric>_std`` (sample std, ddof=1; NaN for one seed)
    and ``n`` (``workbench.stats.summarize``), rows in the order of :data:`METHODS`, then n ascending."""
    missing = [name for name in ("method", "num_aux", *metrics) if name not in runs.columns]
    if missing:
        raise ValueError(f"runs: missing columns {missing}; expected a run_study table")
    table = summarize_runs(runs, ["method", "num_aux"], metrics)
    order = {method: index for index, method in enumerate(METHODS)}
    table = table.sort_values(["method", "num_aux"], key=lambda column: column.map(order) if column.name == "method" else column)
    return table.reset_index(drop=True)


def key_metrics(runs: pd.DataFrame) -> dict[str, Any]:
    """metrics.json ``metrics``: baseline vs two-stage at n* = :func:`select_num_aux`.

    ``chosen_num_aux``, ``<method>_<metric>`` as ``{"mean", "std", "n"}`` over seeds for the
    baseline and two-stage at n*, and ``delta_macro_f1``: the per-seed difference two-stage at n*
    minus baseline (paired by seed), as ``{"mean", "std", "n"}``; then the same
    ``<method>_<metric>`` for each variant that ran (FGM, M-BERT, MRE, MRE-F).
    """
    summary = summarize(runs)
    chosen = select_num_aux(runs)
    metrics: dict[str, Any] = {"chosen_num_aux": chosen}
    for method, num_aux in ((BASELINE, 0), (TWO_STAGE, chosen)):
        row = summary[(summary["method"] == method) & (summary["num_aux"] == num_aux)].iloc[0]
        for metric in METRICS:
            metrics[f"{method}_{metric}"] = row_statistics(row, metric)
    baseline = runs[runs["method"] == BASELINE].set_index("seed")["macro_f1"]
    two_stage = runs[(runs["method"] == TWO_STAGE) & (runs["num_aux"] == chosen)].set_index("seed")["macro_f1"]
    seeds = baseline.index.intersection(two_stage.index)
    metrics["delta_macro_f1"] = describe(two_stage[seeds] - baseline[seeds])
    for method in (TWO_STAGE_FGM, *FUSION_METHODS):
        rows = summary[summary["method"] == method]
        if len(rows) == 1:
            metrics.update({f"{method}_{metric}": row_statistics(rows.iloc[0], metric) for metric in METRICS})
    return metrics


def describe_fusion(config: Config | Mapping[str, Any]) -> str:
    """Which two encoders the fusion methods of ``config`` combine, in words: ``model`` and
    ``aux.fusion_model``, or the fallback when that is null (a second tiny BERT of the same size,
    or the same checkpoint loaded twice), named as such."""
    return fusion_description(load_config(config))
