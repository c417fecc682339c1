"""The Dice paper's claims on the results page (notebook 01's evidence cell), from the fits its studies kept.

"Dice Loss for Data-imbalanced NLP Tasks" (Li et al., ACL 2020, arXiv 1911.02855): Table 8 (each loss against CE
under the five training sets, F1 of the positive class), the fair baselines on the original set (a threshold tuned on
validation, class-balanced and logit-adjusted CE, CE with the post-hoc logit adjustment), Table 10 (the Tversky alpha
chosen on validation against alpha = 0.5) and Table 9's caveat (dice losses against CE in accuracy on a balanced task,
with the exact McNemar test per seed). A binary task: F1 is that of label 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

import numpy as np
from datasets import DatasetDict

from workbench.decisions import logit_adjustment_rule, tuned_predictions
from workbench.evidence import Claim, compare
from workbench.stats import mcnemar_test
from workbench.train import extra_rows

PAPER = "arXiv 1911.02855"
DSC_CLAIM = Claim(PAPER, "Table 8", "DSC achieves the highest F1 score across all datasets.")
NEGATIVE_CLAIM = Claim(
    PAPER, "Table 8, +negative", "In contrast, it significantly outperforms DL for +negative dataset."
)
TABLE8_ROWS = {  # the printed rows of Table 8 (whitespace as in a table: single spaces)
    "FL": Claim(PAPER, "Table 8", "BERT+FL 91.86(+0.56) 92.64(+0.37) 90.61(+0.53) 90.79(+1.06) 93.45(+0.31)"),
    "DL": Claim(PAPER, "Table 8", "BERT+DL 91.92(+0.62) 92.87(+0.60) 90.22(+0.14) 90.49(+0.76) 93.52(+0.38)"),
}
WCE_CLAIM = Claim(
    PAPER,
    "sec. 3.2, eq. 2 (weighted CE is not in Table 8)",
    "Intuitively, this equation assigns less weight to the majority class and more weight to the minority class.",
)
TVERSKY_CLAIM = Claim(
    PAPER,
    "Table 10",
    "the performance varies a lot as α changes in distinct datasets, which shows that the hyperparameters α, β "
    "acturally play an important role in TI.",
)
ACCURACY_CLAIM = Claim(
    PAPER,
    "Table 9",
    "For SST-5, BERT with CE achieves 55.57 in terms of accuracy, while DL and DSC perform slightly worse (54.63 and "
    "55.19, respectively).",
)
CLAIMED = {"FL": "FL", "DL": "DL", "DSC": "DSC (eq. 12)", "DSC reference": "DSC (released preset)", "WCE": "WCE"}
"""The losses the Table 8 rows test against CE, and their names on the page."""
FAIR = ("class-balanced CE", "logit-adjusted CE")
EXTRA_REFERENCES = ("CE", "DSC", "DSC reference")
"""What an extra setting is compared with: CE (the task's baseline) and the paper's DSC, as printed and as released."""


def _argmax(cell: Mapping[int, Any]) -> dict[int, np.ndarray]:
    return {seed: fit.test_predictions for seed, fit in cell.items()}


def claim_rows(
    splits: DatasetDict,
    test: str,
    setting: str,
    table8: Mapping[tuple[str, str], Mapping[int, Any]],
    sweep: Mapping[tuple[str, str], Mapping[int, Any]] | None = None,
    chosen_alpha: float | None = None,
    table9: Mapping[tuple[str, str], Mapping[int, Any]] | None = None,
    balanced: DatasetDict | None = None,
    n_resamples: int = 2000,
) -> list[dict[str, Any]]:
    """The rows of notebook 01 from the fits ``run_grid`` kept (``fits``: (setting, loss) -> {seed: Fit}): ``table8``
    (Table 8's grid on ``splits``), ``sweep`` with the ``chosen_alpha`` (Table 10), ``table9`` on the ``balanced``
    splits (Table 9). Each row pairs seed s of a loss with seed s of its baseline; rows need both to have run."""
    gold = np.asarray(splits["test"]["label"], dtype=np.int64)
    if gold.max() > 1 or len(splits["train"].features["label"].names) != 2:
        raise ValueError("splits: the Dice paper's claims are rows of a binary task (label 1 positive)")
    row = partial(compare, y_true=gold, test=test, num_labels=2, n_resamples=n_resamples)
    rows = []
    sets = list(dict.fromkeys(name for name, _ in table8))
    for training_set in sets:
        cells = {loss: cell for (name, loss), cell in table8.items() if name == training_set}
        if "CE" not in cells:
            continue
        for loss, label in CLAIMED.items():
            if loss in cells:
                claim = TABLE8_ROWS.get(loss, WCE_CLAIM if loss == "WCE" else DSC_CLAIM)
                rows.append(
                    row(
                        claim,
                        setting=f"{setting}, {training_set}",
                        method=label,
                        baseline="CE",
                        metric="f1_positive",
                        method_predictions=_argmax(cells[loss]),
                        baseline_predictions=_argmax(cells["CE"]),
                    )
                )
        if training_set == "+negative" and "DL" in cells:
            for loss in ("DSC", "DSC reference"):
                if loss in cells:
                    rows.append(
                        row(
                            NEGATIVE_CLAIM,
                            setting=f"{setting}, +negative",
                            method=CLAIMED[loss],
                            baseline="DL",
                            metric="f1_positive",
                            method_predictions=_argmax(cells[loss]),
                            baseline_predictions=_argmax(cells["DL"]),
                        )
                    )
    rows += _fair_rows(
        splits, setting, {loss: cell for (name, loss), cell in table8.items() if name == "original"}, row
    )
    if sweep and chosen_alpha is not None and ("TL", "0.5") in sweep:
        chosen = sweep[("TL", f"{chosen_alpha:g}")]
        rows.append(
            row(
                TVERSKY_CLAIM,
                setting=f"{setting}, original",
                method=f"TL, alpha = {chosen_alpha:g} (chosen on validation)",
                baseline="TL, alpha = 0.5 (dice)",
                metric="f1_positive",
                method_predictions=_argmax(chosen),
                baseline_predictions=_argmax(sweep[("TL", "0.5")]),
            )
        )
    if table9 and balanced is not None:
        rows += _accuracy_rows(balanced, setting, table9, test, n_resamples)
    return rows


def _fair_rows(splits: DatasetDict, setting: str, cells: Mapping[str, Mapping[int, Any]], row: Any) -> list[dict]:
    """The DSC forms on the original set against the fair baselines (F1 of the positive class): CE with a threshold
    tuned on validation, class-balanced CE, logit-adjusted CE, CE with the post-hoc logit adjustment; and each DSC form
    with its own tuned threshold against CE with its own."""
    if "CE" not in cells:
        return []
    validation = np.asarray(splits["validation"]["label"], dtype=np.int64)
    counts = np.bincount(np.asarray(splits["train"]["label"], dtype=np.int64), minlength=2)
    adjusted = logit_adjustment_rule(counts)
    baselines = {
        "CE + threshold tuned on validation": tuned_predictions(cells["CE"], validation, "f1_positive"),
        **{name: _argmax(cells[name]) for name in FAIR if name in cells},
        "CE + post-hoc logit adjustment": {
            s: adjusted.predict(fit.test_probabilities) for s, fit in cells["CE"].items()
        },
    }
    rows = []
    for loss in ("DSC", "DSC reference"):
        if loss not in cells:
            continue
        for baseline, predictions in baselines.items():
            rows.append(
                row(
                    DSC_CLAIM,
                    setting=f"{setting}, original, fair baselines",
                    method=CLAIMED[loss],
                    baseline=baseline,
                    metric="f1_positive",
                    method_predictions=_argmax(cells[loss]),
                    baseline_predictions=predictions,
                )
            )
        tuned = tuned_predictions(cells[loss], validation, "f1_positive")
        rows.append(
            row(
                DSC_CLAIM,
                setting=f"{setting}, original, thresholds tuned on validation",
                method=f"{CLAIMED[loss]} + threshold",
                baseline="CE + threshold",
                metric="f1_positive",
                method_predictions=tuned,
                baseline_predictions=baselines["CE + threshold tuned on validation"],
            )
        )
    return rows


def _accuracy_rows(
    balanced: DatasetDict,
    setting: str,
    table9: Mapping[tuple[str, str], Mapping[int, Any]],
    test: str,
    n_resamples: int,
) -> list[dict[str, Any]]:
    """Table 9's caveat: DL and the DSC forms against CE in accuracy on the balanced task (claimed: worse), with the
    exact McNemar test per seed in the row's note."""
    gold = np.asarray(balanced["test"]["label"], dtype=np.int64)
    cells = {loss: cell for (_, loss), cell in table9.items()}
    rows = []
    for loss in ("DL", "DSC", "DSC reference"):
        if loss not in cells or "CE" not in cells:
            continue
        method, baseline = _argmax(cells[loss]), _argmax(cells["CE"])
        p_values = [mcnemar_test(gold, method[seed], baseline[seed])["p_value"] for seed in sorted(method)]
        note = f"Table 9, {CLAIMED[loss]} against CE: exact McNemar p per seed " + ", ".join(
            f"{p:.3f}" for p in p_values
        )
        rows.append(
            compare(
                ACCURACY_CLAIM,
                setting=f"{setting}, balanced (every split down-sampled to equal classes)",
                method=CLAIMED[loss],
                baseline="CE",
                metric="accuracy",
                y_true=gold,
                method_predictions=method,
                baseline_predictions=baseline,
                test=f"{test}, balanced",
                num_labels=2,
                expected="worse",
                n_resamples=n_resamples,
                note=note,
            )
        )
    return rows


def extra_setting_rows(
    splits: DatasetDict,
    test: str,
    setting: str,
    table8: Mapping[tuple[str, str], Mapping[int, Any]],
    extra_settings: Mapping[str, Any] | None,
    n_resamples: int = 2000,
) -> list[dict[str, Any]]:
    """Each extra setting of Table 8's grid (``table8``: (training set, loss) -> {seed: Fit}) against
    :data:`EXTRA_REFERENCES` that ran, on each training set, F1 of the positive class, argmax decisions
    (``workbench.train.extra_rows``: ``workbench.evidence.compare``, as every row)."""
    gold = np.asarray(splits["test"]["label"], dtype=np.int64)
    rows = []
    for training_set in dict.fromkeys(name for name, _ in table8):
        predictions = {
            (loss, seed): fit.test_predictions
            for (name, loss), cell in table8.items()
            if name == training_set
            for seed, fit in cell.items()
        }
        rows += extra_rows(
            extra_settings,
            predictions,
            EXTRA_REFERENCES,
            y_true=gold,
            test=test,
            setting=f"{setting}, {training_set}",
            metrics=("f1_positive",),
            num_labels=2,
            n_resamples=n_resamples,
        )
    return rows
