"""Notebook 03's rows on the results page: Table 2's rates of held-out corrections against the paper's ranges and
Table 6's comparisons downstream, each beside the paper's own difference (``experiments`` re-exports them)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from workbench.evidence import N_RESAMPLES, Claim, compare, rate

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


def rate_rows(corrections: pd.DataFrame, encoder: str, test: str) -> list[dict[str, Any]]:
    """Table 2's two rates of ``encoder``'s held-out corrections (:func:`~workbench.studies.true_negatives.
    hard_correction.correction_table`) at each level, against the paper's ranges (``workbench.evidence.rate``)."""
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
                    )
                )
    return rows


def downstream_rows(
    predictions: Mapping[tuple[str, int], tuple[np.ndarray, np.ndarray]],
    strategy: str,
    setting: str,
    test: str,
    num_labels: int,
    train_counts: Sequence[int],
    n_resamples: int = N_RESAMPLES,
) -> list[dict[str, Any]]:
    """Table 6's comparisons downstream (test macro-F1, fine-tuning seeds paired), for the ``strategy`` runs present:
    HC (word and the paper's token level) and SR (eq. 3) against plain MLM, sentence-level SR against plain MLM, and HC
    with the lexicon against HC with embedding neighbours (the second block), beside the paper's differences.
    ``train_counts``: the fine-tuning training split's label counts (the trivial baseline's prior)."""
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
        )
        for claim, method, baseline, key in pairs
        if method in encoders and baseline in encoders
    ]
