"""Notebook 03, sections 7-8 and results: downstream fine-tuning, the joined results table and Table 6's comparisons."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.checks import check_choice, check_seeds
from workbench.config import HC_LEVELS, Config, load_config
from workbench.stats import formatted, row_statistics, summarize
from workbench.train import finetune

from .pretraining import DEFAULT_SOURCE, run_names

DOWNSTREAM_METRICS = ("macro_f1", "accuracy")
RATE_KEYS = ("prediction_rate", "iteration_rate")
RUN_COLUMNS = ("masking", "objective", "synonyms", "train_loss", "eval_loss", "perplexity", "time")
RUN_COLUMNS += tuple(f"{side}_{rate}" for side in ("train", "eval") for rate in RATE_KEYS)
COMPARISON_COLUMNS = ("encoder", "variant", *RUN_COLUMNS[3:], "heldout_prediction_rate")
COMPARISON_COLUMNS += ("macro_f1", "macro_f1_mean", "macro_f1_std", "delta_macro_f1", "n")


def downstream_grid(
    base_config: Config | Mapping[str, Any], encoders: Mapping[str, str | Path | None], output_root: str | Path, seeds=(0,)
) -> pd.DataFrame:
    """Fine-tune each encoder (a checkpoint folder, or None: a fresh tiny BERT from ``model.tiny``) with each seed.

    ``base_config``: a finetune config; ``output_dir``, ``model.model_name_or_path`` and ``training.seed`` are set per
    run (a checkpoint brings its tokenizer: ``model.vocab_file`` is cleared). The split stays ``data.seed``; the epoch
    is chosen on validation macro-F1. One row per run: encoder, seed, test macro_f1 and accuracy, best_validation_macro_f1.
    """
    if not encoders:
        raise ValueError("encoders: must name at least one encoder, got none")
    seeds = check_seeds("seeds", seeds)
    base = load_config(base_config, task="finetune")
    rows = []
    for name, checkpoint in encoders.items():
        model = (
            {"model_name_or_path": None} if checkpoint is None else {"model_name_or_path": str(checkpoint), "vocab_file": None}
        )
        for seed in seeds:
            config = base.replace(
                output_dir=str(Path(output_root) / f"{name}-seed{seed}"), training={"seed": int(seed)}, model=model
            )
            metrics = finetune(config).metrics
            rows.append(
                {
                    "encoder": name,
                    "seed": int(seed),
                    **{key: metrics[key] for key in (*DOWNSTREAM_METRICS, "best_validation_macro_f1")},
                }
            )
    return pd.DataFrame(rows)


def downstream_summary(downstream: pd.DataFrame) -> pd.DataFrame:
    """Per encoder: mean, std (ddof = 1), n and a "mean ± std" text column of test macro-F1 and accuracy."""
    return formatted(summarize(downstream, "encoder", DOWNSTREAM_METRICS), DOWNSTREAM_METRICS)


def results_table(runs: pd.DataFrame, corrections: pd.DataFrame, summary: pd.DataFrame, level: str = "word") -> pd.DataFrame:
    """One row per encoder of ``summary``: its pre-training (:data:`RUN_COLUMNS` that ``runs`` has), the held-out
    correction rates (``heldout_<rate>_<level>`` per level, ``heldout_<rate>`` at ``level``) and the downstream scores.
    Encoders without pre-training have empty pre-training columns."""
    pretraining = runs.assign(encoder=run_names(runs))
    pretraining = pretraining[["encoder", *(column for column in RUN_COLUMNS if column in pretraining.columns)]]
    corrections = corrections.assign(encoder=run_names(corrections))
    if "level" not in corrections.columns:
        corrections = corrections.assign(level=level)
    check_choice("level", level, sorted(set(corrections["level"])))
    wide = corrections.pivot(index="encoder", columns="level", values=list(RATE_KEYS))
    heldout = pd.DataFrame({f"heldout_{rate}_{lvl}": wide[(rate, lvl)] for rate, lvl in wide.columns})
    heldout = heldout.assign(**{f"heldout_{rate}": wide[(rate, level)] for rate in RATE_KEYS}).reset_index()
    downstream = summary[["encoder", "macro_f1_mean", "macro_f1_std", "macro_f1", "accuracy_mean", "accuracy_std", "n"]]
    table = downstream.merge(pretraining, on="encoder", how="left").merge(heldout, on="encoder", how="left")
    first = ["encoder", "masking", "objective", "train_loss", "train_prediction_rate", *(f"heldout_{rate}" for rate in RATE_KEYS)]
    first += ["macro_f1", "macro_f1_mean", "macro_f1_std", "accuracy_mean", "accuracy_std", "n"]
    return table[first + [column for column in table.columns if column not in first]]


def best_encoder(results: pd.DataFrame) -> str:
    """The encoder of :func:`results_table` with the best mean test macro-F1."""
    return str(results.set_index("encoder")["macro_f1_mean"].idxmax())


def _comparison(results: pd.DataFrame, variants: Mapping[str, str], baseline: str) -> pd.DataFrame:
    """``baseline``'s row, then each present ``label -> encoder`` of ``variants``, with ``delta_macro_f1`` = mean
    macro-F1 minus the baseline's (the paper's Δ column)."""
    by_encoder = results.set_index("encoder")
    check_choice("baseline", baseline, list(by_encoder.index))
    rows = {"baseline": baseline, **{label: encoder for label, encoder in variants.items() if encoder in by_encoder.index}}
    table = by_encoder.loc[list(rows.values())].reset_index()
    table.insert(1, "variant", list(rows))
    table["delta_macro_f1"] = table["macro_f1_mean"] - float(by_encoder.loc[baseline, "macro_f1_mean"])
    return table[[column for column in COMPARISON_COLUMNS if column in table.columns]]


def synonym_source_table(results: pd.DataFrame, masking: str = "wwm", objective: str = "hc_word") -> pd.DataFrame:
    """Table 6, second block: ``<masking>-plain``, then every ``<masking>-<objective>`` run by synonym source (the
    lexicon first); columns :data:`COMPARISON_COLUMNS` present in ``results``."""
    rows = results[(results["masking"] == masking) & (results["objective"] == objective)]
    if rows.empty:
        raise ValueError(f"masking/objective: no {masking}-{objective} run in the table {list(results['encoder'])}")
    sources = rows["synonyms"] if "synonyms" in rows.columns else pd.Series(DEFAULT_SOURCE, index=rows.index)
    order = sorted(zip(sources, rows["encoder"]), key=lambda pair: (pair[0] != DEFAULT_SOURCE, pair[0]))
    return _comparison(results, {f"HC ({source})": encoder for source, encoder in order}, f"{masking}-plain")


def sr_level_table(results: pd.DataFrame, masking: str = "wwm") -> pd.DataFrame:
    """Table 6, third block: ``<masking>-plain``, ``<masking>-sr`` (eq. 3, the paper's word level) and
    ``<masking>-sr_sentence`` (KL of Sec. 5); ``time`` shows the sentence level's extra encoder passes."""
    variants = {"SR word (eq. 3)": f"{masking}-sr", "SR sentence (KL)": f"{masking}-sr_sentence"}
    return _comparison(results, variants, f"{masking}-plain")


def headline_metrics(results: pd.DataFrame, baseline: str = "no_pretraining") -> dict[str, Any]:
    """metrics.json ``metrics``: ``macro_f1_best`` and ``macro_f1_<baseline>`` (``{"mean", "std", "n"}``), the mean
    held-out prediction-level rate (also per level), the mean training-time rate of ``hc`` and ``hc_word`` runs and
    the lowest held-out perplexity."""
    by_encoder = results.set_index("encoder")
    check_choice("baseline", baseline, list(by_encoder.index))
    metrics: dict[str, Any] = {
        "macro_f1_best": row_statistics(by_encoder.loc[best_encoder(results)], "macro_f1"),
        f"macro_f1_{baseline}": row_statistics(by_encoder.loc[baseline], "macro_f1"),
        "heldout_prediction_rate_mean": float(results["heldout_prediction_rate"].mean()),
    }
    for level in HC_LEVELS:
        if f"heldout_prediction_rate_{level}" in results.columns:
            metrics[f"heldout_prediction_rate_{level}_mean"] = float(results[f"heldout_prediction_rate_{level}"].mean())
    for objective in ("hc", "hc_word"):
        rates = results.loc[results["objective"] == objective, "train_prediction_rate"]
        if objective == "hc" or len(rates):
            metrics[f"train_prediction_rate_{objective}_mean"] = float(rates.mean()) if len(rates) else None
    if "perplexity" in results.columns and results["perplexity"].notna().any():
        metrics["perplexity_min"] = float(results["perplexity"].min())
    return metrics
