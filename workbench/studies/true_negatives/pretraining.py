"""Notebook 03, sections 2-3: the pre-training grid (masking x objective) and the paper's Table 2 per checkpoint."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from workbench.checks import check_choice
from workbench.config import Config, load_config
from workbench.train import pretrain_mlm

from .masking_demo import STRATEGIES, check_strategies

OBJECTIVES = ("plain", "hc", "sr")
"""The three objective names of the config (``objective.name``)."""
OBJECTIVE_VARIANTS: dict[str, dict[str, str]] = {
    "plain": {"name": "plain"},
    "hc": {"name": "hc", "hc_level": "token"},
    "hc_word": {"name": "hc", "hc_level": "word"},
    "sr": {"name": "sr", "level": "token"},
    "sr_sentence": {"name": "sr", "level": "sentence"},
}
"""``objective`` overrides per run: ``hc`` the paper's token rule (eq. 2, footnote 5), ``hc_word`` the workbench's
whole-word extension, ``sr`` eq. 3 (Table 6's "word-level" SR), ``sr_sentence`` the KL of Sec. 5; every other
``objective`` setting comes from the base config."""
DEFAULT_SOURCE = "lexicon"
"""The ``synonyms`` label of runs that use the base config's ``objective.lexicon``."""
RATES = ("prediction_rate", "iteration_rate", "wrong", "corrected")


def check_objectives(objectives: Sequence[str]) -> None:
    if not objectives:
        raise ValueError(f"objectives: must be a non-empty list from {', '.join(OBJECTIVE_VARIANTS)}, got []")
    for objective in objectives:
        check_choice("objectives", objective, tuple(OBJECTIVE_VARIANTS))


def encoder_name(masking: str, objective: str, synonyms: str = DEFAULT_SOURCE) -> str:
    """``<masking>-<objective>``, with ``@<synonyms>`` for another synonym source than the lexicon."""
    return f"{masking}-{objective}" + ("" if synonyms == DEFAULT_SOURCE else f"@{synonyms}")


def _pretrain(base: Config, root: Path, strategy: str, objective: str, seed: int, synonyms: str = DEFAULT_SOURCE, lexicon=None):
    """One pretrain_mlm run into ``root/<encoder>``; its row of :func:`pretraining_grid`."""
    name = encoder_name(strategy, objective, synonyms)
    overrides = {**OBJECTIVE_VARIANTS[objective], **({} if lexicon is None else {"lexicon": str(lexicon)})}
    config = base.replace(
        output_dir=str(root / name), masking={"strategy": strategy}, objective=overrides, training={"seed": seed}
    )
    metrics = pretrain_mlm(config).metrics
    final = (metrics.get("epochs") or [{}])[-1]
    correction = metrics.get("correction", {})
    return {
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


def pretraining_grid(
    base_config: Config | Mapping[str, Any],
    output_root: str | Path,
    strategies: Sequence[str] = STRATEGIES,
    objectives: Sequence[str] = OBJECTIVES,
    seed: int = 0,
    extra_runs: Sequence[Sequence[str]] = (),
) -> pd.DataFrame:
    """:func:`~workbench.train.pretrain_mlm` for every (strategy, objective variant), then each ``(strategy,
    objective)`` of ``extra_runs`` not in the grid, into ``output_root/<strategy>-<objective>``.

    One row per run: encoder, masking, objective, synonyms, hc_level, seed, train_loss, the final held-out eval_loss,
    perplexity and HC rates (``eval_prediction_rate``, ``eval_iteration_rate``), the training-time HC rates
    (``train_*``; NaN for plain and SR), time and output_dir.
    """
    check_strategies(strategies, STRATEGIES)
    check_objectives(objectives)
    plan = [(strategy, objective) for strategy in strategies for objective in objectives]
    for pair in extra_runs:
        if len(pair) != 2:
            raise ValueError(f"extra_runs: must hold (strategy, objective) pairs, got {pair!r}")
        check_strategies([pair[0]], STRATEGIES)
        check_objectives([pair[1]])
        plan += [] if tuple(pair) in plan else [tuple(pair)]
    base = load_config(base_config, task="pretrain_mlm")
    return pd.DataFrame([_pretrain(base, Path(output_root), strategy, objective, seed) for strategy, objective in plan])


def synonym_source_runs(
    base_config: Config | Mapping[str, Any],
    output_root: str | Path,
    lexicons: Mapping[str, str | Path],
    strategy: str = "wwm",
    objective: str = "hc_word",
    seed: int = 0,
) -> pd.DataFrame:
    """HC pre-training with other synonym sources (Table 6, second block): one run per ``name -> lexicon file``,
    into ``output_root/<strategy>-<objective>@<name>``; rows as :func:`pretraining_grid`'s, ``synonyms = name``."""
    check_strategies([strategy], STRATEGIES)
    check_choice("objective", objective, ("hc", "hc_word"))
    if not lexicons or DEFAULT_SOURCE in lexicons:
        raise ValueError(f"lexicons: must name at least one source other than {DEFAULT_SOURCE!r}, got {list(lexicons)!r}")
    base = load_config(base_config, task="pretrain_mlm")
    return pd.DataFrame(
        [_pretrain(base, Path(output_root), strategy, objective, seed, name, path) for name, path in lexicons.items()]
    )


def run_names(runs: pd.DataFrame) -> pd.Series:
    """The encoder name of each run: its ``encoder`` column, else ``<masking>-<objective>``."""
    return runs["encoder"] if "encoder" in runs.columns else runs["masking"] + "-" + runs["objective"]


def _metrics_file(output_dir: str | Path) -> dict[str, Any]:
    return json.loads((Path(output_dir) / "metrics.json").read_text(encoding="utf-8"))


def loss_history(runs: pd.DataFrame) -> pd.DataFrame:
    """The logged training loss of every run (its metrics.json): columns masking, objective (with ``@<source>``), step, loss."""
    rows = [
        {"masking": run.masking, "objective": name.removeprefix(f"{run.masking}-"), "step": entry["step"], "loss": entry["loss"]}
        for run, name in zip(runs.itertuples(), run_names(runs))
        for entry in _metrics_file(run.output_dir)["history"]
        if "loss" in entry
    ]
    return pd.DataFrame(rows, columns=["masking", "objective", "step", "loss"])


EPOCH_COLUMNS = (
    *("encoder", "masking", "objective", "synonyms", "epoch", "step", "checkpoint", "eval_loss", "perplexity"),
    *(f"{side}_{rate}" for side in ("eval", "train") for rate in RATES),
)


def epoch_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Every run's per-epoch records (metrics.json ``epochs``), one row per (run, epoch): :data:`EPOCH_COLUMNS`.

    ``checkpoint``: the share of the run's steps done, in % (Table 2's "Check."); ``eval_*``: held-out blocks with
    fixed whole-word masks (plain MLM loss, perplexity = exp(loss), HC rates of the predictions with the run's
    table and ``hc_level``); ``train_*``: the HC rates of that epoch's training batches (NaN unless HC). Rates are
    fractions: prediction = corrected / wrong, iteration = sequences with a correction / sequences.
    """
    rows = []
    for run, name in zip(runs.itertuples(), run_names(runs)):
        epochs = _metrics_file(run.output_dir).get("epochs", [])
        last_step = max((record["step"] for record in epochs), default=0)
        rows += [
            {
                "encoder": name,
                "masking": run.masking,
                "objective": run.objective,
                "synonyms": getattr(run, "synonyms", DEFAULT_SOURCE),
                "epoch": record["epoch"],
                "step": record["step"],
                "checkpoint": 100.0 * record["step"] / last_step if last_step else np.nan,
                "eval_loss": record["eval_loss"],
                "perplexity": record["perplexity"],
                **{f"{side}_{rate}": record.get(f"{side}_hc_{rate}", np.nan) for side in ("eval", "train") for rate in RATES},
            }
            for record in epochs
        ]
    return pd.DataFrame(rows, columns=list(EPOCH_COLUMNS))


def table2(epochs: pd.DataFrame, encoder: str) -> pd.DataFrame:
    """One run of :func:`epoch_table` as the paper's Table 2, in %: ``Check.``, ``Iter.`` and ``Pred.`` on the held-out
    blocks and the epoch's training batches, and the held-out eval loss and perplexity."""
    check_choice("encoder", encoder, sorted(set(epochs["encoder"])))
    rows = epochs[epochs["encoder"] == encoder].reset_index(drop=True)
    return pd.DataFrame(
        {
            "Check.": rows["checkpoint"],
            **{
                f"{side} {short}": 100 * rows[f"{key}_{rate}_rate"]
                for side, key in (("held-out", "eval"), ("train", "train"))
                for short, rate in (("Iter.", "iteration"), ("Pred.", "prediction"))
            },
            "eval loss": rows["eval_loss"],
            "perplexity": rows["perplexity"],
        }
    )
