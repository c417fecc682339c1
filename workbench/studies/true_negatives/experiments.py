"""Notebook 03, sections 2-3 and 7-8: the pre-training grid (masking x objective) with the paper's Table 2 per
checkpoint, downstream fine-tuning, and the results with Table 6's two comparisons."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from workbench.checks import check_choice, check_names, check_seeds
from workbench.config import Config, load_config
from workbench.evidence import run_size
from workbench.losses import HC_LEVELS
from workbench.stats import formatted, row_statistics, summarize
from workbench.train import finetune, pretrain_mlm, read_predictions

from .masking_demo import STRATEGIES

OBJECTIVE_VARIANTS: dict[str, dict[str, str]] = {
    "plain": {"name": "plain"},
    "hc": {"name": "hc", "hc_level": "token"},
    "hc_word": {"name": "hc", "hc_level": "word"},
    "sr": {"name": "sr", "level": "token"},
    "sr_sentence": {"name": "sr", "level": "sentence"},
}
"""``objective`` overrides per run: ``hc`` eq. 2 at the paper's token level (footnote 5), ``hc_word`` the workbench's
whole-word level, ``sr`` eq. 3 (Table 6's word level), ``sr_sentence`` the KL of Sec. 5; the rest comes from the base
config."""
DEFAULT_SOURCE = "lexicon"
"""The ``synonyms`` label of runs that use the base config's ``objective.lexicon``."""
RATES = ("prediction_rate", "iteration_rate", "wrong", "corrected")


def run_names(plan: Sequence[Sequence[str]]) -> list[str]:
    """The runs of ``plan`` by the names :func:`pretraining_runs` gives them (``wwm-hc_word``), once each, checked
    before anything runs: ValueError naming ``strategies`` or ``objectives`` for a name outside their choices."""
    if not plan or any(not isinstance(pair, list | tuple) or len(pair) != 2 for pair in plan):
        raise ValueError(f"plan: must be a non-empty list of (strategy, objective) pairs, got {plan!r}")
    check_names("strategies", [pair[0] for pair in plan], STRATEGIES, distinct=False)
    check_names("objectives", [pair[1] for pair in plan], list(OBJECTIVE_VARIANTS), distinct=False)
    return list(dict.fromkeys(f"{strategy}-{objective}" for strategy, objective in plan))


def pretraining_runs(
    base_config: Config | Mapping[str, Any],
    output_root: str | Path,
    plan: Sequence[Sequence[str]],
    seed: int = 0,
    synonyms: str = DEFAULT_SOURCE,
    lexicon: str | Path | None = None,
) -> pd.DataFrame:
    """:func:`~workbench.train.pretrain_mlm` per ``(strategy, objective variant)`` of ``plan`` (repeats run once) into
    ``output_root/<masking>-<objective>[@<synonyms>]``; ``lexicon``, a .tsv file named ``synonyms``, replaces the
    synonym table (Table 6). One row per run: settings, train_loss, the final held-out eval_loss, perplexity and HC
    rates (``eval_*``), the training-time HC rates (``train_*``; NaN for plain and SR), time and output_dir."""
    run_names(plan)
    if (lexicon is None) != (synonyms == DEFAULT_SOURCE):
        raise ValueError(
            f"synonyms: must name the source of lexicon (not {DEFAULT_SOURCE!r}) when one is given, got {synonyms!r}"
        )
    base = load_config(base_config, task="pretrain_mlm")
    rows = []
    for strategy, objective in dict.fromkeys(map(tuple, plan)):
        name = f"{strategy}-{objective}" + ("" if synonyms == DEFAULT_SOURCE else f"@{synonyms}")
        overrides = {**OBJECTIVE_VARIANTS[objective], **({} if lexicon is None else {"lexicon": str(lexicon)})}
        masking = {"strategy": strategy}
        training = {"seed": seed}
        config = base.replace(
            output_dir=str(Path(output_root) / name), masking=masking, objective=overrides, training=training
        )
        metrics = pretrain_mlm(config).metrics
        final = (metrics.get("epochs") or [{}])[-1]
        correction = metrics.get("correction", {})
        rows.append(
            {
                "encoder": name,
                "masking": strategy,
                "objective": objective,
                "synonyms": synonyms,
                "hc_level": config.objective.hc_level,
                "seed": seed,
                "train_loss": metrics["train_loss"],
                "eval_loss": metrics["eval_loss"],
                "perplexity": np.nan if metrics.get("perplexity") is None else metrics["perplexity"],
                **{f"eval_{rate}": final.get(f"eval_hc_{rate}", np.nan) for rate in RATES[:2]},
                **{f"train_{rate}": correction.get(rate, np.nan) for rate in RATES[:2]},
                "time": metrics["time"],
                "output_dir": config.output_dir,
            }
        )
    return pd.DataFrame(rows)


def _metrics_file(output_dir: str | Path) -> dict[str, Any]:
    return json.loads((Path(output_dir) / "metrics.json").read_text(encoding="utf-8"))


def loss_history(runs: pd.DataFrame) -> pd.DataFrame:
    """The logged training loss of every run (its metrics.json): columns masking, objective (with ``@<source>``),
    step and loss."""
    rows = [
        (run.masking, run.encoder.removeprefix(f"{run.masking}-"), entry["step"], entry["loss"])
        for run in runs.itertuples()
        for entry in _metrics_file(run.output_dir)["history"]
        if "loss" in entry
    ]
    return pd.DataFrame(rows, columns=["masking", "objective", "step", "loss"])


EPOCH_COLUMNS = (
    *("encoder", "masking", "objective", "synonyms", "epoch", "step", "checkpoint", "eval_loss", "perplexity"),
    *(f"{side}_{rate}" for side in ("eval", "train") for rate in RATES),
)


def epoch_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Every run's per-epoch records (metrics.json ``epochs``): :data:`EPOCH_COLUMNS`. ``checkpoint``: the share of the
    run's steps done, in % (Table 2's "Check."); ``eval_*``: held-out blocks with fixed masks; ``train_*``: that epoch's
    training batches (NaN unless HC). Rates: corrected / wrong (prediction level), corrected sequences / sequences
    (iteration level)."""
    records = [
        {
            "encoder": run.encoder,
            "masking": run.masking,
            "objective": run.objective,
            "synonyms": getattr(run, "synonyms", DEFAULT_SOURCE),
            **{key.replace("_hc_", "_"): value for key, value in record.items()},
        }
        for run in runs.itertuples()
        for record in _metrics_file(run.output_dir).get("epochs", [])
    ]
    epochs = pd.DataFrame(records, columns=list(EPOCH_COLUMNS))
    return epochs.assign(checkpoint=100.0 * epochs["step"] / epochs.groupby("encoder")["step"].transform("max"))


def table2(epochs: pd.DataFrame, encoder: str) -> pd.DataFrame:
    """One run of :func:`epoch_table` as the paper's Table 2 (rates in %), the held-out and the training batches
    side by side."""
    check_choice("encoder", encoder, sorted(set(epochs["encoder"])))
    rows = epochs[epochs["encoder"] == encoder].reset_index(drop=True)
    return pd.DataFrame(
        {
            "Check.": rows["checkpoint"],
            "held-out Iter.": 100 * rows["eval_iteration_rate"],
            "held-out Pred.": 100 * rows["eval_prediction_rate"],
            "train Iter.": 100 * rows["train_iteration_rate"],
            "train Pred.": 100 * rows["train_prediction_rate"],
            "eval loss": rows["eval_loss"],
            "perplexity": rows["perplexity"],
        }
    )


DOWNSTREAM_METRICS = ("macro_f1", "accuracy")
RUN_COLUMNS = ("masking", "objective", "synonyms", "train_loss", "eval_loss", "perplexity", "time")
RUN_COLUMNS += tuple(f"{side}_{rate}" for side in ("train", "eval") for rate in RATES[:2])
COMPARISON_COLUMNS = ("encoder", "variant", *RUN_COLUMNS[3:], "heldout_prediction_rate")
COMPARISON_COLUMNS += ("macro_f1", "macro_f1_mean", "macro_f1_std", "delta_macro_f1", "n")


def downstream_grid(
    base_config: Config | Mapping[str, Any],
    encoders: Mapping[str, str | Path | None],
    output_root: str | Path,
    seeds=(0,),
) -> pd.DataFrame:
    """Fine-tune (``base_config``, a finetune config) each encoder, a checkpoint folder (its tokenizer replaces
    ``model.vocab_file``) or None (a fresh ``model.tiny``), with each seed (``training.seed``; the split stays
    ``data.seed``). One row per run: encoder, seed, test macro_f1 and accuracy, best_validation_macro_f1."""
    if not encoders:
        raise ValueError("encoders: must name at least one encoder, got none")
    seeds = check_seeds("seeds", seeds)
    base = load_config(base_config, task="finetune")
    rows = []
    keys = (*DOWNSTREAM_METRICS, "best_validation_macro_f1")
    for name, path in encoders.items():
        model = {"model_name_or_path": None} if path is None else {"model_name_or_path": str(path), "vocab_file": None}
        for seed in seeds:
            output_dir = str(Path(output_root) / f"{name}-seed{seed}")
            metrics = finetune(base.replace(output_dir=output_dir, training={"seed": int(seed)}, model=model)).metrics
            rows.append({"encoder": name, "seed": int(seed), **{key: metrics[key] for key in keys}})
    return pd.DataFrame(rows)


def downstream_summary(downstream: pd.DataFrame) -> pd.DataFrame:
    """Per encoder: mean, std (ddof = 1), n and a "mean ± std" text column of test macro-F1 and accuracy."""
    return formatted(summarize(downstream, "encoder", DOWNSTREAM_METRICS), DOWNSTREAM_METRICS)


def results_table(
    runs: pd.DataFrame, corrections: pd.DataFrame, summary: pd.DataFrame, level: str = "word"
) -> pd.DataFrame:
    """One row per encoder of ``summary``: its pre-training (:data:`RUN_COLUMNS`; empty without), the held-out HC rates
    (``heldout_<rate>_<level>`` per level, ``heldout_<rate>`` at ``level``) and the downstream scores."""
    pretraining = runs[["encoder", *(column for column in RUN_COLUMNS if column in runs.columns)]]
    if "level" not in corrections.columns:
        corrections = corrections.assign(level=level)
    check_choice("level", level, sorted(set(corrections["level"])))
    wide = corrections.pivot(index="encoder", columns="level", values=list(RATES[:2]))
    heldout = pd.DataFrame({f"heldout_{rate}_{lvl}": wide[(rate, lvl)] for rate, lvl in wide.columns})
    heldout = heldout.assign(**{f"heldout_{rate}": wide[(rate, level)] for rate in RATES[:2]}).reset_index()
    downstream = summary[["encoder", "macro_f1_mean", "macro_f1_std", "macro_f1", "accuracy_mean", "accuracy_std", "n"]]
    table = downstream.merge(pretraining, on="encoder", how="left").merge(heldout, on="encoder", how="left")
    first = [
        "encoder",
        "masking",
        "objective",
        "train_loss",
        "train_prediction_rate",
        *(f"heldout_{rate}" for rate in RATES[:2]),
    ]
    first += ["macro_f1", "macro_f1_mean", "macro_f1_std", "accuracy_mean", "accuracy_std", "n"]
    return table[first + [column for column in table.columns if column not in first]]


def best_encoder(results: pd.DataFrame) -> str:
    """The encoder of :func:`results_table` with the best mean test macro-F1."""
    return str(results.set_index("encoder")["macro_f1_mean"].idxmax())


def _comparison(results: pd.DataFrame, variants: Mapping[str, str], baseline: str) -> pd.DataFrame:
    """``baseline``'s row, then each present ``label -> encoder`` of ``variants``; ``delta_macro_f1``: the paper's Δ."""
    by_encoder = results.set_index("encoder")
    check_choice("baseline", baseline, list(by_encoder.index))
    rows = {
        "baseline": baseline,
        **{label: encoder for label, encoder in variants.items() if encoder in by_encoder.index},
    }
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
    """metrics.json ``metrics``: ``macro_f1_best``, ``macro_f1_<baseline>``, the mean held-out HC rate (also per level),
    the mean training-time rate of ``hc`` and ``hc_word`` runs and the lowest held-out perplexity."""
    by_encoder = results.set_index("encoder")
    check_choice("baseline", baseline, list(by_encoder.index))
    metrics: dict[str, Any] = {
        "macro_f1_best": row_statistics(by_encoder.loc[best_encoder(results)], "macro_f1"),
        f"macro_f1_{baseline}": row_statistics(by_encoder.loc[baseline], "macro_f1"),
    }
    heldout = [column for column in results.columns if column.startswith("heldout_prediction_rate")]  # and per level
    metrics.update({f"{column}_mean": float(results[column].mean()) for column in heldout})
    for objective in ("hc", "hc_word"):
        rates = results.loc[results["objective"] == objective, "train_prediction_rate"]
        if objective == "hc" or len(rates):
            metrics[f"train_prediction_rate_{objective}_mean"] = float(rates.mean()) if len(rates) else None
    if "perplexity" in results.columns and results["perplexity"].notna().any():
        metrics["perplexity_min"] = float(results["perplexity"].min())
    return metrics


def this_run(results: pd.DataFrame, epochs: pd.DataFrame, table2_run: str, strategy: str = "wwm") -> str:
    """The run's key numbers in one line (HC rates in % of the wrong predictions), which the notebook's reading
    quotes."""
    rows = results.set_index("encoder")
    trained = rows[rows["masking"].notna()]
    run = epochs[epochs["encoder"] == table2_run]
    corrected = trained[trained["objective"].isin(["hc", "hc_word"])]["train_prediction_rate"]
    levels = [trained.get(f"heldout_prediction_rate_{level}", pd.Series(np.nan, trained.index)) for level in HC_LEVELS]
    best = best_encoder(results)
    return (
        f"This run: {table2_run}, held-out prediction-level HC rate per checkpoint "
        + ", ".join(f"{check:.0f}%: {rate:.2%}" for check, rate in zip(run["checkpoint"], run["eval_prediction_rate"]))
        + f" (perplexity {run['perplexity'].iloc[0]:.1f} -> {run['perplexity'].iloc[-1]:.1f}). "
        + "Training-time HC rate over the run: "
        + ", ".join(f"{encoder} {rate:.2%}" for encoder, rate in corrected.items())
        + ". Held-out HC rate, token / word level: "
        + ", ".join(f"{encoder} {token:.2%} / {word:.2%}" for encoder, token, word in zip(trained.index, *levels))
        + ". "
        + "; ".join(
            f"{encoder}: train loss {row['train_loss']:.3f}, perplexity {row['perplexity']:.2f}, "
            f"{row['time']:.0f} s, macro-F1 {row['macro_f1']}"
            for encoder, row in trained.iterrows()
            if encoder.startswith(f"{strategy}-")
        )
        + f". Downstream: best encoder {best} ({rows.loc[best, 'macro_f1']})"
        + "".join(
            f", {name} {rows.loc[name, 'macro_f1']}" for name in rows.index.difference(trained.index) if name != best
        )
        + "."
    )


def downstream_predictions(
    output_root: str | Path, encoders: Sequence[str], seeds: Sequence[int]
) -> dict[tuple[str, int], tuple[np.ndarray, np.ndarray]]:
    """(gold, predicted) test labels of every :func:`downstream_grid` run under ``output_root``, by (encoder, seed)."""
    return {
        (name, int(seed)): read_predictions(Path(output_root) / f"{name}-seed{seed}")
        for name in encoders
        for seed in seeds
    }


def downstream_size(output_root: str | Path, encoder: str, seed: int, training_examples: int) -> dict[str, Any]:
    """The scale table's line of one :func:`downstream_grid` run (its metrics.json: parameters, optimizer steps)."""
    return run_size(
        f"{encoder} (fine-tuned)", _metrics_file(Path(output_root) / f"{encoder}-seed{seed}"), training_examples
    )
