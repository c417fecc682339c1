"""Classification metrics (scikit-learn): macro-F1, accuracy, per-class scores,
confusion matrix, and the far-error rate of ordinal tasks such as QBQTC."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sklearn.metrics import accuracy_score, confusion_matrix, precision_recall_fscore_support


def _as_label_array(name: str, values: Sequence[int] | np.ndarray) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name}: must be one-dimensional, got shape {array.shape}")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{name}: must hold integer class ids, got dtype {array.dtype}")
    return array.astype(np.int64)


def _validated_pair(
    labels: Sequence[int] | np.ndarray, predictions: Sequence[int] | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    gold, pred = _as_label_array("labels", labels), _as_label_array("predictions", predictions)
    if gold.shape != pred.shape:
        raise ValueError(f"predictions: must have the same length as labels ({gold.size}), got {pred.size}")
    if gold.size == 0:
        raise ValueError("labels: must hold at least one label, got none")
    return gold, pred


def far_error_rate(labels: Sequence[int] | np.ndarray, predictions: Sequence[int] | np.ndarray) -> float:
    """Share of predictions two or more ordinal steps from the gold label: mean(|pred - gold| >= 2).

    The workbench's definition of a far error, by label distance alone: on QBQTC "irrelevant" judged "highly
    relevant" and vice versa (0 <-> 2), the errors farthest apart. It is not the set that the PCL paper's eq. 4
    punishes: its condition 2 ("Condition 2 tends to punish the model, e.g., the model misclassifies label 2 into
    label 0") covers, in the workbench's reading (``workbench.losses.pcl``), gold 1 predicted 0 as well, which is
    one step from gold and not counted here.
    """
    gold, pred = _validated_pair(labels, predictions)
    return float(np.mean(np.abs(pred - gold) >= 2))


def classification_report(
    labels: Sequence[int] | np.ndarray,
    predictions: Sequence[int] | np.ndarray,
    label_names: Sequence[str] | None = None,
    num_labels: int | None = None,
    ordinal: bool = False,
) -> dict:
    """Scores of ``predictions`` against gold ``labels`` (integer class ids 0..K-1).

    K is ``num_labels``, else ``len(label_names)``, else 1 + the largest id seen; ``ordinal``:
    the class ids are ordered (QBQTC's relevance), which the far-error rate needs.
    Returns a JSON-ready dict:

    * ``macro_f1``: unweighted mean of the K per-class F1 (absent classes count as 0),
    * ``accuracy``,
    * ``per_class``: {name: {precision, recall, f1, support}} (zero_division=0),
    * ``confusion_matrix``: K x K list of lists, rows gold, columns predicted,
    * ``far_error_rate`` (only when ``ordinal``): see ``far_error_rate``,
    * ``label_names``, ``num_examples``.
    """
    gold, pred = _validated_pair(labels, predictions)
    if num_labels is None:
        num_labels = len(label_names) if label_names is not None else int(max(gold.max(), pred.max())) + 1
    if not isinstance(num_labels, int) or num_labels < 1:
        raise ValueError(f"num_labels: must be an integer >= 1, got {num_labels!r}")
    if label_names is not None and len(label_names) != num_labels:
        raise ValueError(f"label_names: must have num_labels={num_labels} names, got {len(label_names)}")
    for name, array in (("labels", gold), ("predictions", pred)):
        if array.min() < 0 or array.max() >= num_labels:
            raise ValueError(
                f"{name}: class ids must be in [0, {num_labels - 1}], got range [{array.min()}, {array.max()}]"
            )
    names = list(label_names) if label_names is not None else [str(k) for k in range(num_labels)]
    classes = list(range(num_labels))
    precision, recall, f1, support = precision_recall_fscore_support(
        gold, pred, labels=classes, average=None, zero_division=0
    )
    report = {
        "macro_f1": float(np.mean(f1)),
        "accuracy": float(accuracy_score(gold, pred)),
        "per_class": {
            name: {"precision": float(p), "recall": float(r), "f1": float(f), "support": int(n)}
            for name, p, r, f, n in zip(names, precision, recall, f1, support)
        },
        "confusion_matrix": confusion_matrix(gold, pred, labels=classes).tolist(),
        "label_names": names,
        "num_examples": int(gold.size),
    }
    return {**report, "far_error_rate": far_error_rate(gold, pred)} if ordinal else report
