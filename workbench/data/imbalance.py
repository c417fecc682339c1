"""Resampling and augmentation for imbalanced data, and the Dice-loss paper's Table 8 training sets
(Li et al., 2020, Sec. 5.1; docs/data.md). Added rows are ``augmenter(text)`` (the paper's new sentences;
here :class:`SynonymAugmenter`) or exact copies, a labelled option. Every function is seeded
(``np.random.default_rng(seed)``), keeps rows in their order and appends new rows at the end."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from datasets import Dataset, concatenate_datasets

from workbench.checks import check_choice, check_int, check_number
from workbench.data.features import check_seed

if TYPE_CHECKING:
    from workbench.masking.segment import JiebaSegmenter
    from workbench.synonyms import SynonymTable


Augmenter = Callable[[str], str]
METHODS = ("downsample", "upsample")
TABLE8_SETTINGS = ("original", "+positive", "+negative", "-negative", "+positive & +negative")


def _class_indices(ds: Dataset, label: int, name: str = "label") -> np.ndarray:
    num_labels = len(ds.features["label"].names)
    if not isinstance(label, int) or not 0 <= label < num_labels:
        raise ValueError(f"{name}: must be a class id in [0, {num_labels - 1}], got {label!r}")
    return np.flatnonzero(np.asarray(ds["label"], dtype=np.int64) == label)


def _drop_random(ds: Dataset, members: np.ndarray, n_drop: int, seed: int) -> Dataset:
    """``ds`` without ``n_drop`` rows drawn uniformly without replacement from ``members``."""
    dropped = np.random.default_rng(seed).choice(members, size=n_drop, replace=False)
    return ds.select(np.setdiff1d(np.arange(len(ds)), dropped))


def _add_copies(ds: Dataset, members: np.ndarray, n_extra: int, seed: int, augmenter: Augmenter | None) -> Dataset:
    """``ds`` plus ``n_extra`` rows copied from ``members`` in whole random passes (each member once
    before any twice); with ``augmenter`` the copies' text is ``augmenter(text)``."""
    if n_extra == 0:
        return ds
    rng = np.random.default_rng(seed)
    sources = np.concatenate([rng.permutation(members) for _ in range(-(-n_extra // members.size))])[:n_extra]
    added = ds.select(sources)
    if augmenter is not None:
        columns = added.to_dict()
        columns["text"] = [augmenter(text) for text in columns["text"]]
        wrong = sorted({type(text).__name__ for text in columns["text"] if not isinstance(text, str)})
        if wrong:
            raise ValueError(f"augmenter: must return a str, got {', '.join(wrong)}")
        added = Dataset.from_dict(columns, features=ds.features)
    return concatenate_datasets([ds, added])


def downsample(
    ds: Dataset, label: int, ratio: float | None = None, target: int | None = None, seed: int = 0
) -> Dataset:
    """Keep a random subset of class ``label``: ``target`` examples (in [0, n_label]), or
    ``round(ratio * n_label)`` (``ratio`` in (0, 1]); give exactly one. Other classes are untouched."""
    seed = check_seed(seed)
    members = _class_indices(ds, label)
    if (ratio is None) == (target is None):
        raise ValueError(f"ratio: give exactly one of ratio and target, got ratio={ratio!r} and target={target!r}")
    if ratio is not None:
        target = int(round(check_number("ratio", ratio, 0, 1, low_inclusive=False) * members.size))
    check_int("target", target, 0, members.size)
    return _drop_random(ds, members, members.size - target, seed)


def upsample(ds: Dataset, label: int, target: int, seed: int = 0, augmenter: Augmenter | None = None) -> Dataset:
    """Grow class ``label`` to ``target`` examples by appending copies drawn in whole random passes
    (or ``augmenter(text)`` of them, e.g. a :class:`SynonymAugmenter`)."""
    seed = check_seed(seed)
    members = _class_indices(ds, label)
    if members.size == 0:
        raise ValueError(f"label: class {label} has no examples to upsample")
    check_int("target", target, members.size)
    return _add_copies(ds, members, target - members.size, seed, augmenter)


def rebalance(
    ds: Dataset,
    target_ratio: float,
    positive_label: int = 1,
    method: str = "downsample",
    seed: int = 0,
    augmenter: Augmenter | None = None,
) -> Dataset:
    """Resample to ``n_positive / n_negative = target_ratio`` (negatives: every other class): ``downsample``
    drops random examples of the side with too many, ``upsample`` adds copies (or ``augmenter`` outputs)."""
    seed = check_seed(seed)
    check_choice("method", method, METHODS)
    check_number("target_ratio", target_ratio, 0, low_inclusive=False)
    positives = _class_indices(ds, positive_label, "positive_label")
    negatives = np.setdiff1d(np.arange(len(ds)), positives)
    if positives.size == 0 or negatives.size == 0:
        raise ValueError(
            f"positive_label: need both positives and negatives, got {positives.size} and {negatives.size}"
        )
    wanted_positives = int(round(target_ratio * negatives.size))
    wanted_negatives = int(round(positives.size / target_ratio))
    if method == "downsample":
        if positives.size > wanted_positives:
            return _drop_random(ds, positives, positives.size - wanted_positives, seed)
        return _drop_random(ds, negatives, negatives.size - wanted_negatives, seed)
    if positives.size < wanted_positives:
        return _add_copies(ds, positives, wanted_positives - positives.size, seed, augmenter)
    return _add_copies(ds, negatives, max(wanted_negatives - negatives.size, 0), seed, augmenter)


# ----------------------------------------------------------------------------- synonym replacement


def _replace_synonyms(
    text: str, synonyms: SynonymTable, segmenter: JiebaSegmenter, rng: np.random.Generator, n_words: int
) -> str:
    words = segmenter.words(text)
    options = [sorted(synonyms.synonyms(word)) for word in words]  # sorted: set order varies between processes
    eligible = [index for index, choices in enumerate(options) if choices]
    if not eligible:
        return text
    for index in rng.choice(eligible, size=min(n_words, len(eligible)), replace=False).tolist():
        words[index] = options[index][int(rng.integers(len(options[index])))]
    return "".join(words)


def synonym_replace(text: str, synonyms: SynonymTable, segmenter: JiebaSegmenter, seed: int, n_words: int = 1) -> str:
    """``text`` with ``n_words`` of its jieba words that have synonyms (fewer if fewer have) replaced by
    one of their synonyms, all drawn uniformly with ``np.random.default_rng(seed)``."""
    rng = np.random.default_rng(check_seed(seed))
    return _replace_synonyms(text, synonyms, segmenter, rng, check_int("n_words", n_words, 1))


class SynonymAugmenter:
    """An ``augmenter``: call i (i = 0, 1, ...) returns :func:`synonym_replace` of the text drawn with
    ``np.random.default_rng([seed, i])`` (copies of one template differ; a fresh augmenter replays).
    ``calls`` and ``unchanged`` (texts without a word in the lexicon: exact copies) give the share.
    Defaults: ``SynonymTable.default()`` (the shipped tiny Cilin lexicon), ``JiebaSegmenter(pos=False)``."""

    def __init__(
        self,
        synonyms: SynonymTable | None = None,
        segmenter: JiebaSegmenter | None = None,
        seed: int = 0,
        n_words: int = 1,
    ) -> None:
        if synonyms is None:
            from workbench.synonyms import SynonymTable

            synonyms = SynonymTable.default()
        if segmenter is None:
            from workbench.masking.segment import JiebaSegmenter

            segmenter = JiebaSegmenter(pos=False)
        self.synonyms = synonyms
        self.segmenter = segmenter
        self.seed = check_seed(seed)
        self.n_words = check_int("n_words", n_words, 1)
        self.calls = self.unchanged = 0

    def __call__(self, text: str) -> str:
        rng = np.random.default_rng([self.seed, self.calls])
        self.calls += 1
        result = _replace_synonyms(text, self.synonyms, self.segmenter, rng, self.n_words)
        self.unchanged += result == text
        return result


# ----------------------------------------------------------------------------- Table 8


def table8_class_counts(n_positive: int, n_negative: int) -> OrderedDict[str, tuple[int, int]]:
    """``{setting: (positives, negatives)}`` of Table 8 from n_p positives and n_n > n_p negatives:
    original (n_p, n_n); +positive (n_n, n_n); +negative (n_p, 2 n_n - n_p); -negative (n_p, n_p);
    +positive & +negative (m, 2 n_n - m), m = round(2 n_n n_p / (n_p + n_n)) (QQP: docs/data.md)."""
    n_p = check_int("n_positive", n_positive, 1)
    n_n = check_int("n_negative", n_negative, 1)
    if not n_p < n_n:
        raise ValueError(f"n_positive: must be fewer than the negatives ({n_n}), got {n_p}")
    m = int(round(2 * n_n * n_p / (n_p + n_n)))
    return OrderedDict(
        zip(TABLE8_SETTINGS, [(n_p, n_n), (n_n, n_n), (n_p, 2 * n_n - n_p), (n_p, n_p), (m, 2 * n_n - m)])
    )


def table8_training_sets(
    train: Dataset, seed: int, augmenter: Augmenter | None = None, positive_label: int = 1
) -> OrderedDict[str, Dataset]:
    """The five training sets of Table 8 with the sizes of :func:`table8_class_counts` (positives:
    ``positive_label``): added rows are ``augmenter(text)`` of templates of their class drawn in whole
    random passes (:func:`upsample`), -negative drops random negatives. Needs 0 < positives < negatives."""
    seed = check_seed(seed)
    positives = _class_indices(train, positive_label, "positive_label")
    negatives = np.setdiff1d(np.arange(len(train)), positives)
    if not 0 < positives.size < negatives.size:
        raise ValueError(
            f"train: must have 0 < positives (label {positive_label}) < negatives, "
            f"got {positives.size} positives and {negatives.size} negatives"
        )
    counts = table8_class_counts(positives.size, negatives.size)

    def grow(ds: Dataset, members: np.ndarray, target: int) -> Dataset:
        # rows keep their positions when rows are appended, so ``members`` still index the originals
        return _add_copies(ds, members, target - members.size, seed, augmenter)

    mixed_positives, mixed_negatives = counts["+positive & +negative"]
    return OrderedDict(
        [
            ("original", train),
            ("+positive", grow(train, positives, counts["+positive"][0])),
            ("+negative", grow(train, negatives, counts["+negative"][1])),
            ("-negative", _drop_random(train, negatives, negatives.size - positives.size, seed)),
            ("+positive & +negative", grow(grow(train, positives, mixed_positives), negatives, mixed_negatives)),
        ]
    )
