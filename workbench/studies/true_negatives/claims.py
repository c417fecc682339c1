"""Notebook 03, section 9: the claim rows of the results page (Table 2's rates of held-out corrections against the
paper's ranges, Table 6's comparisons downstream, each beside the paper's own difference) and the study's evidence
entry: what the page needs to say that pre-training ran once per objective, how often Table 2's event occurred, that
the held-out texts are unseen, and which hyperparameters were fixed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from workbench.checks import check_choice
from workbench.config import Config
from workbench.data import label_counts, label_names, load_splits, load_texts, text_key
from workbench.evidence import N_RESAMPLES, Claim, compare, rate, record, scale, split_label
from workbench.train import fixed_hyperparameters

from .experiments import downstream_predictions, downstream_size

PAPER = "arXiv 2212.00460"
TABLE2_CLAIM = Claim(
    PAPER,
    "Table 2",
    "the ratio of detected false negatives is around 6.0%-7.0% in iteration-level and 1.0%-2.0% in token-level.",
)
TABLE2_RANGES = {"prediction": (0.01, 0.02), "iteration": (0.06, 0.07)}
BOOST_CLAIM = Claim(PAPER, "sec. 1; Table 6", "our approach boosts the baseline performance by a large margin")
SOURCE_CLAIM = Claim(PAPER, "Table 6, second block", "turns out to be better suitable for our task")
SENTENCE_CLAIM = Claim(
    PAPER, "Table 6, third block", "also outperforms the baseline and nearly reaches the performance of word-level one"
)
DOWNSTREAM_METRIC = "macro_f1"
DOWNSTREAM_DIFFERENCES = {  # GLUE average over the baseline (Table 3: BERT base and large, ELECTRA small and base)
    "hc_word": ((0.7, 0.4, 1.0, 0.7), "Table 3: HC over the baseline, GLUE average, four models"),
    "hc": ((0.7, 0.4, 1.0, 0.7), "Table 3: HC over the baseline, GLUE average, four models"),
    "sr": ((0.6, 0.4, 1.5, 0.6), "Table 3: SR over the baseline, GLUE average, four models"),
    "sr_sentence": ((81.6 - 80.4,), "Table 6, third block: sentence-level SR over ELECTRA-small, GLUE average"),
    "hc_word@embedding": ((81.4 - 80.6,), "Table 6, second block: HC with WordNet over HC with embeddings"),
}
PAPER_SCALE = {
    "model": "ELECTRA-small to BERT-large, pre-trained with each objective (Tables 3, 6)",
    "parameters": "14 M (ELECTRA-small) to 340 M (BERT-large), their model cards",
    "training examples": "pre-training corpora of the original models; GLUE tasks downstream",
}
"""The paper's scale beside this run's on the results page."""
TABLE2_EVENT = "a wrong prediction that is a synonym of the gold word (a correction)"
"""The event both of Table 2's rates count: while the model predicts no synonym, both rates are 0 by absence of the
event, and ``workbench.evidence`` sets the rows apart as not testable at this scale (naming the event)."""


def rate_rows(corrections: pd.DataFrame, encoder: str, test: str) -> list[dict[str, Any]]:
    """Table 2's two rates of ``encoder``'s held-out corrections (:func:`~workbench.studies.true_negatives.
    hard_correction.correction_table`) at each level, against the paper's ranges (``workbench.evidence.rate``). Each
    counts :data:`TABLE2_EVENT`: corrected / wrong predictions, sequences with a correction / sequences; a row whose
    event never occurs is not testable (``workbench.evidence.why_not_tested``), not a verdict."""
    rows = []
    for entry in corrections[corrections["encoder"] == encoder].itertuples():
        counts = {
            "prediction": (entry.corrected, entry.wrong, "prediction level: corrected / wrong predictions"),
            "iteration": (entry.sequences_with_correction, entry.sequences, "iteration level: sequences corrected"),
        }
        for name, (successes, trials, measure) in counts.items():
            if trials:
                rows.append(
                    rate(
                        TABLE2_CLAIM,
                        setting=f"{encoder}, {entry.level} level",
                        method=encoder,
                        measure=measure,
                        successes=int(successes),
                        trials=int(trials),
                        paper_range=TABLE2_RANGES[name],
                        test=test,
                        event=TABLE2_EVENT,
                    )
                )
    return rows


def table2_events(corrections: pd.DataFrame, epochs: pd.DataFrame, encoder: str) -> dict[str, Any]:
    """How often Table 2's event (:data:`TABLE2_EVENT`) occurred for ``encoder``: on the held-out texts per level
    (``heldout``: corrected, wrong, sequences_with_correction, sequences; the counts of :func:`rate_rows`) and at every
    checkpoint on the held-out blocks (``checkpoints``: the paper's Table 2 is per checkpoint)."""
    check_choice("encoder", encoder, sorted(set(corrections["encoder"])))
    keys = ("corrected", "wrong", "sequences_with_correction", "sequences")
    heldout = {
        entry["level"]: {key: int(entry[key]) for key in keys}
        for entry in corrections[corrections["encoder"] == encoder].to_dict(orient="records")
    }
    checkpoints = [
        {
            "checkpoint": float(entry["checkpoint"]),
            "epoch": float(entry["epoch"]),
            **{key: int(entry[f"eval_{key}"]) for key in ("corrected", "wrong") if pd.notna(entry[f"eval_{key}"])},
        }
        for entry in epochs[epochs["encoder"] == encoder].to_dict(orient="records")
    ]
    return {"event": TABLE2_EVENT, "heldout": heldout, "checkpoints": checkpoints}


def downstream_rows(
    predictions: Mapping[tuple[str, int], tuple[np.ndarray, np.ndarray]],
    strategy: str,
    setting: str,
    test: str,
    num_labels: int,
    train_counts: Sequence[int],
    n_resamples: int = N_RESAMPLES,
    note: str = "",
) -> list[dict[str, Any]]:
    """Table 6's comparisons downstream (test macro-F1, fine-tuning seeds paired), for the ``strategy`` runs present:
    HC (word and the paper's token level) and SR (eq. 3) against plain MLM, sentence-level SR against plain MLM, and HC
    with the lexicon against HC with embedding neighbours (the second block), beside the paper's differences.
    ``train_counts``: the fine-tuning training split's label counts (the trivial baseline's prior); ``note`` on every
    row (e.g. :data:`CONFOUNDED`)."""
    golds = [gold for gold, _ in predictions.values()]
    if not golds or any(not np.array_equal(gold, golds[0]) for gold in golds):
        raise ValueError("predictions: must hold every run's labels of one and the same test split")
    encoders = {name for name, _ in predictions}

    def of(encoder: str) -> dict[int, np.ndarray]:
        return {seed: pred for (name, seed), (_, pred) in predictions.items() if name == encoder}

    plain = f"{strategy}-plain"
    pairs = [(BOOST_CLAIM, f"{strategy}-{objective}", plain, objective) for objective in ("hc_word", "hc", "sr")]
    pairs += [(SENTENCE_CLAIM, f"{strategy}-sr_sentence", plain, "sr_sentence")]
    pairs += [(SOURCE_CLAIM, f"{strategy}-hc_word", f"{strategy}-hc_word@embedding", "hc_word@embedding")]
    return [
        compare(
            claim,
            setting=setting,
            method=method,
            baseline=baseline,
            metric=DOWNSTREAM_METRIC,
            y_true=golds[0],
            method_predictions=of(method),
            baseline_predictions=of(baseline),
            test=test,
            num_labels=num_labels,
            train_counts=train_counts,
            paper_difference=DOWNSTREAM_DIFFERENCES[key][0],
            paper_basis=DOWNSTREAM_DIFFERENCES[key][1],
            n_resamples=n_resamples,
            note=note,
        )
        for claim, method, baseline, key in pairs
        if method in encoders and baseline in encoders
    ]


CONFOUNDED = (
    "each objective was pre-trained once (seed {seed}): a difference between two encoders mixes the objective with "
    "that run's randomness (initialisation, masks, order), which the interval does not hold; it pairs the fine-tuning "
    "seeds and resamples the test examples"
)
"""The note on every downstream row when the budget allows one pre-training run per objective."""
TITLE = "Language Model Pre-training on True Negatives (HC, SR)"


def heldout_record(data: Any, heldout: Sequence[str]) -> dict[str, Any]:
    """Where notebook 03's held-out texts come from: the pre-training texts' ``load_texts`` provenance (repeats
    removed, under ``duplicates``), how many texts pre-train and are held out, and ``shared_with_pretraining``
    (counted, by :func:`~workbench.data.text_key`: 0 by construction)."""
    loaded = load_texts(data)
    seen = {text_key(text) for text in loaded[0]}
    return {
        **loaded.provenance,
        "heldout_texts": len(heldout),
        "shared_with_pretraining": sum(text_key(text) in seen for text in heldout),
    }


def hyperparameters(pretrain_config: Config, finetune_config: Config) -> dict[str, Any]:
    """What notebook 03 fixes and what it chooses on validation, for the results page (issue 36): ``fixed``, the
    fine-tuning and pre-training optimiser settings (``workbench.train.fixed_hyperparameters``, the same for every
    encoder) and SR's weight; ``chosen`` on validation: the fine-tuning epoch."""
    pretraining = fixed_hyperparameters(pretrain_config.training)
    finetuning = fixed_hyperparameters(finetune_config.training)
    return {
        "fixed": {
            **{f"fine-tuning {key}": value for key, value in finetuning.items()},
            **{f"pre-training {key}": value for key, value in pretraining.items()},
            "SR weight": pretrain_config.objective.weight,
        },
        "chosen": {"epoch": "the fine-tuning epoch with the best validation macro-F1, the same rule for every encoder"},
    }


def evidence_record(
    *,
    corrections: pd.DataFrame,
    epochs: pd.DataFrame,
    table2_run: str,
    heldout: Sequence[str],
    finetune_root: str | Path,
    encoders: Sequence[str],
    seeds: Sequence[int],
    pretraining_seed: int,
    strategy: str,
    pretrain_config: Config,
    finetune_config: Config,
    sections: Mapping[str, Any],
) -> dict[str, Any]:
    """Notebook 03's ``evidence`` entry (``workbench.evidence.record``): Table 2's rates (:func:`rate_rows`, on the
    ``heldout`` texts) and Table 6's downstream rows (:func:`downstream_rows`, each with :data:`CONFOUNDED`), the
    fine-tuning splits' provenance, one fine-tuning run's size beside the paper's scale, what is fixed and chosen
    (:func:`hyperparameters`); beside them ``design`` (one pre-training run per objective, ``pretraining_seed``: the
    confound), ``table2_events`` (:func:`table2_events`) and ``pretraining`` (:func:`heldout_record`)."""
    seed = pretraining_seed
    downstream = load_splits(finetune_config.data)
    classes = len(label_names(downstream["train"]))
    rows = rate_rows(corrections, table2_run, f"held-out corpus texts ({len(heldout):,})")
    rows += downstream_rows(
        downstream_predictions(finetune_root, encoders, seeds),
        strategy,
        f"{finetune_config.data.source} downstream",
        split_label(downstream.provenance),
        classes,
        label_counts(downstream["train"], classes),
        note=CONFOUNDED.format(seed=seed),
    )
    comment = (
        f"Pre-training ran once per objective (seed {seed}), so each objective is confounded with one pre-training "
        "run; the CIs pair the fine-tuning seeds. The paper pre-trains ELECTRA and BERT at full scale."
    )
    named = hyperparameters(pretrain_config, finetune_config)
    entry = record(
        TITLE,
        scale(**sections),
        seeds,
        rows,
        downstream.provenance,
        comment=comment,
        sizes=[downstream_size(finetune_root, encoders[0], seeds[0], len(downstream["train"]))],
        paper_scale=PAPER_SCALE,
        fixed=named["fixed"],
        chosen=named["chosen"],
    )
    return {
        **entry,
        "design": {
            "pretraining_seeds": [seed],
            "finetuning_seeds": list(seeds),
            "confounded": CONFOUNDED.format(seed=seed),
        },
        "table2_events": table2_events(corrections, epochs, table2_run),
        "pretraining": heldout_record(pretrain_config.data, heldout),
    }
