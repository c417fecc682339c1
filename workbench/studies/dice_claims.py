"""The Dice paper's claims on the results page (notebook 01's evidence cell), from the fits its studies kept.

"Dice Loss for Data-imbalanced NLP Tasks" (Li et al., ACL 2020, arXiv 1911.02855): Table 8 (each loss against CE
under the five training sets, F1 of the positive class, beside the paper's own "(+x)"), the fair baselines on the
original set (class-balanced and logit-adjusted CE, CE with the post-hoc logit adjustment; thresholds tuned on
validation for both sides or for neither), Table 10 (the Tversky alpha chosen on validation against alpha = 0.5) and
Table 9's caveat (dice losses against CE in accuracy on a balanced task, with the exact McNemar test per seed). A
binary task: F1 is that of label 1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import numpy as np
from datasets import DatasetDict

from workbench.config import Config
from workbench.decisions import logit_adjustment_rule, tuned_predictions
from workbench.evidence import N_RESAMPLES, Claim, compare, fit_size, identity, record, scale, split_label
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
TABLE8_DIFFERENCES = {  # Table 8's "(+x)" over BERT (CE), per training set, F1 on QQP
    "FL": {"original": 0.56, "+positive": 0.37, "+negative": 0.53, "-negative": 1.06, "+positive & +negative": 0.31},
    "DL": {"original": 0.62, "+positive": 0.60, "+negative": 0.14, "-negative": 0.76, "+positive & +negative": 0.38},
    "DSC": {"original": 0.81, "+positive": 0.65, "+negative": 0.70, "-negative": 1.07, "+positive & +negative": 0.49},
}
TABLE8_DIFFERENCES["DSC reference"] = TABLE8_DIFFERENCES["DSC"]
DSC_OVER_DL = 90.78 - 90.22  # Table 8, +negative: BERT+DSC against BERT+DL
TVERSKY_CLAIM = Claim(
    PAPER,
    "Table 10",
    "the performance varies a lot as α changes in distinct datasets, which shows that the hyperparameters α, β "
    "acturally play an important role in TI.",
)
TVERSKY_DIFFERENCES = (84.67 - 84.47, 68.44 - 67.52)  # Table 10: the best alpha against 0.5 (OntoNotes4.0, QuoRef)
ACCURACY_CLAIM = Claim(
    PAPER,
    "Table 9",
    "For SST-5, BERT with CE achieves 55.57 in terms of accuracy, while DL and DSC perform slightly worse (54.63 and "
    "55.19, respectively).",
)
TABLE9_DIFFERENCES = {  # Table 9: against BERT+CE, accuracy on SST-2 and SST-5
    "DL": (94.37 - 94.90, 54.63 - 55.57),
    "DSC": (94.84 - 94.90, 55.19 - 55.57),
    "DSC reference": (94.84 - 94.90, 55.19 - 55.57),
}
CLAIMED = {"FL": "FL", "DL": "DL", "DSC": "DSC (eq. 12)", "DSC reference": "DSC (released preset)"}
"""The losses the Table 8 rows test against CE, and their names on the page (weighted CE is described in sec. 3.2,
not claimed to beat CE: no row)."""
FAIR = ("class-balanced CE", "logit-adjusted CE")
EXTRA_REFERENCES = ("CE", "DSC", "DSC reference")
"""What an extra setting is compared with: CE (the task's baseline) and the paper's DSC, as printed and as released."""
PAPER_SCALE = {
    "model": "BERT (QQP, Table 8); BERT-large (SST, Table 9); OntoNotes4.0 and QuoRef models (Table 10)",
    "parameters": "110 M (base) to 340 M (large), the BERT model cards",
    "training examples": "363,871 (QQP original, sec. 5.1) to 458,477 (augmented)",
}
"""The paper's scale beside this run's on the results page."""
TITLE = "Dice Loss for Data-imbalanced NLP Tasks"
"""The paper's title, the heading of notebook 01's rows on the results page."""


def _argmax(cell: Mapping[int, Any]) -> dict[int, np.ndarray]:
    return {seed: fit.test_predictions for seed, fit in cell.items()}


def _counts(split: Any) -> list[int]:
    return np.bincount(np.asarray(split["label"], dtype=np.int64), minlength=2).tolist()


def claim_rows(
    splits: DatasetDict,
    test: str,
    setting: str,
    table8: Mapping[tuple[str, str], Mapping[int, Any]],
    sweep: Mapping[tuple[str, str], Mapping[int, Any]] | None = None,
    chosen_alpha: float | None = None,
    table9: Mapping[tuple[str, str], Mapping[int, Any]] | None = None,
    balanced: DatasetDict | None = None,
    n_resamples: int = N_RESAMPLES,
) -> list[dict[str, Any]]:
    """The rows of notebook 01 from the fits ``run_grid`` kept (``fits``: (setting, loss) -> {seed: Fit}): ``table8``
    (Table 8's grid on ``splits``), ``sweep`` with the ``chosen_alpha`` (Table 10), ``table9`` on the ``balanced``
    splits (Table 9). Each row pairs seed s of a loss with seed s of its baseline; rows need both to have run. The
    trivial baseline's prior is the original training split's (``splits["train"]``)."""
    gold = np.asarray(splits["test"]["label"], dtype=np.int64)
    if gold.max() > 1 or len(splits["train"].features["label"].names) != 2:
        raise ValueError("splits: the Dice paper's claims are rows of a binary task (label 1 positive)")
    row = partial(
        compare, y_true=gold, test=test, num_labels=2, train_counts=_counts(splits["train"]), n_resamples=n_resamples
    )
    rows = []
    sets = list(dict.fromkeys(name for name, _ in table8))
    for training_set in sets:
        cells = {loss: cell for (name, loss), cell in table8.items() if name == training_set}
        if "CE" not in cells:
            continue
        for loss, label in CLAIMED.items():
            if loss in cells:
                paper = TABLE8_DIFFERENCES[loss].get(training_set)
                rows.append(
                    row(
                        TABLE8_ROWS.get(loss, DSC_CLAIM),
                        setting=f"{setting}, {training_set}",
                        method=label,
                        baseline="CE",
                        metric="f1_positive",
                        method_predictions=_argmax(cells[loss]),
                        baseline_predictions=_argmax(cells["CE"]),
                        paper_difference=paper,
                        paper_basis=f"Table 8, {training_set}" if paper is not None else "",
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
                            paper_difference=DSC_OVER_DL,
                            paper_basis="Table 8, +negative: BERT+DSC 90.78 against BERT+DL 90.22",
                        )
                    )
    rows += _fair_rows(
        splits, setting, {loss: cell for (name, loss), cell in table8.items() if name == "original"}, row
    )
    if sweep and chosen_alpha is not None and ("TL", "0.5") in sweep:
        rows.append(_tversky_row(sweep, chosen_alpha, setting, test, row))
    if table9 and balanced is not None:
        rows += _accuracy_rows(balanced, setting, table9, test, n_resamples)
    return rows


def _tversky_row(sweep: Mapping, chosen_alpha: float, setting: str, test: str, row: Any) -> dict[str, Any]:
    """Table 10: the alpha chosen on validation against alpha = 0.5 (the dice loss); the same loss when the validation
    chose 0.5 itself, an identity."""
    chosen, half = _argmax(sweep[("TL", f"{chosen_alpha:g}")]), _argmax(sweep[("TL", "0.5")])
    method = f"TL, alpha = {chosen_alpha:g} (chosen on validation)"
    if chosen_alpha == 0.5:
        return identity(
            TVERSKY_CLAIM,
            setting=f"{setting}, original",
            method=method,
            baseline="TL, alpha = 0.5 (dice)",
            reason="the validation chose alpha = 0.5: the same loss and fits as the baseline",
            method_predictions=chosen,
            baseline_predictions=half,
            test=test,
        )
    return row(
        TVERSKY_CLAIM,
        setting=f"{setting}, original",
        method=method,
        baseline="TL, alpha = 0.5 (dice)",
        metric="f1_positive",
        method_predictions=chosen,
        baseline_predictions=half,
        paper_difference=TVERSKY_DIFFERENCES,
        paper_basis="Table 10: the best alpha against 0.5, 84.67 - 84.47 (OntoNotes4.0), 68.44 - 67.52 (QuoRef)",
    )


def _fair_rows(splits: DatasetDict, setting: str, cells: Mapping[str, Mapping[int, Any]], row: Any) -> list[dict]:
    """The DSC forms on the original set against the fair baselines (F1 of the positive class), one decision rule for
    both sides of a row: argmax against class-balanced CE, logit-adjusted CE and CE with the post-hoc logit adjustment
    (a fixed rule from the training counts, not tuned); each DSC form with its own threshold tuned on validation
    against CE with its own. The paper prints none of these comparisons."""
    if "CE" not in cells:
        return []
    validation = np.asarray(splits["validation"]["label"], dtype=np.int64)
    adjusted = logit_adjustment_rule(_counts(splits["train"]))
    baselines = {
        **{name: _argmax(cells[name]) for name in FAIR if name in cells},
        "CE + post-hoc logit adjustment": {
            s: adjusted.predict(fit.test_probabilities) for s, fit in cells["CE"].items()
        },
    }
    tuned_ce = tuned_predictions(cells["CE"], validation, "f1_positive")
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
        rows.append(
            row(
                DSC_CLAIM,
                setting=f"{setting}, original, fair baselines",
                method=f"{CLAIMED[loss]} + threshold",
                baseline="CE + threshold",
                metric="f1_positive",
                decision_rule="threshold tuned on each side's validation",
                method_predictions=tuned_predictions(cells[loss], validation, "f1_positive"),
                baseline_predictions=tuned_ce,
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
                train_counts=_counts(balanced["train"]),
                expected="worse",
                paper_difference=TABLE9_DIFFERENCES[loss],
                paper_basis="Table 9: against BERT+CE on SST-2 and SST-5",
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
    n_resamples: int = N_RESAMPLES,
) -> list[dict[str, Any]]:
    """Each extra setting of Table 8's grid (``table8``: (training set, loss) -> {seed: Fit}) against
    :data:`EXTRA_REFERENCES` that ran, on each training set, F1 of the positive class, argmax decisions for both
    sides (``workbench.train.extra_rows``: ``workbench.evidence.compare``, as every row; the trivial baseline's prior
    the original training split's, as :func:`claim_rows`)."""
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
            train_counts=_counts(splits["train"]),
            test=test,
            setting=f"{setting}, {training_set}",
            metrics=("f1_positive",),
            num_labels=2,
            n_resamples=n_resamples,
        )
    return rows


def evidence_record(
    splits: DatasetDict,
    table8: Mapping[tuple[str, str], Mapping[int, Any]],
    *,
    sweep: Mapping[tuple[str, str], Mapping[int, Any]] | None,
    chosen_alpha: float | None,
    table9: Mapping[tuple[str, str], Mapping[int, Any]] | None,
    balanced: DatasetDict | None,
    extra_settings: Mapping[str, Any] | None,
    config: Config,
    seeds: Sequence[int],
    training_examples: int,
    hyperparameters: Mapping[str, Any],
    calibration: Sequence[Mapping[str, Any]],
    reliability: Mapping[str, Mapping[str, Sequence[float]]],
    sections: Mapping[str, Any],
    n_resamples: int = N_RESAMPLES,
) -> dict[str, Any]:
    """Notebook 01's ``evidence`` entry (``workbench.evidence.record``) from the fits its studies kept: the rows of
    :func:`claim_rows` (``table8``, ``sweep`` with ``chosen_alpha``, ``table9`` on ``balanced``) and of
    :func:`extra_setting_rows`, on the test split of ``splits``' provenance, each row's setting the data source of
    ``config``; a comment on what the model (``config.model.kind``) stands for; one fit of Table 8's original set (its
    size and steps, on its ``training_examples``) beside :data:`PAPER_SCALE`; what the notebook fixes and chooses
    (``hyperparameters``: ``{"fixed", "chosen"}``, ``workbench.studies.dice.hyperparameters``); the ``calibration``
    rows and ``reliability`` bins of ``workbench.evidence.calibration``; the scale line of the parameter
    ``sections`` the notebook ran with (``workbench.evidence.scale``)."""
    originals = [cell for (name, _), cell in table8.items() if name == "original" and cell]
    if not originals:
        raise ValueError("table8: has no fit on the 'original' training set; the record names the size of one")
    test = split_label(splits.provenance)
    source = config.data.source
    rows = claim_rows(splits, test, source, table8, sweep, chosen_alpha, table9, balanced, n_resamples)
    rows += extra_setting_rows(splits, test, source, table8, extra_settings, n_resamples)  # yours against CE and DSC
    comment = (
        "The claims compare losses; the character probe stands for a fine-tuned BERT."
        if config.model.kind == "probe"
        else "The claims compare losses on the encoder of the scale line (the paper: BERT)."
    )
    first = next(iter(originals[0].values()))  # one fit: its size and steps
    return record(
        TITLE,
        scale(**sections),
        seeds,
        rows,
        splits.provenance,
        calibration,
        comment,
        sizes=[fit_size(config.model.kind, first, training_examples)],
        paper_scale=PAPER_SCALE,
        fixed=hyperparameters["fixed"],
        chosen=hyperparameters["chosen"],
        reliability=reliability,
    )
