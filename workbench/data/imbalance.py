"""Resampling and augmentation for imbalanced data, and the training sets of the Dice-loss
paper's Table 8 (Li et al., 2020, "Dice Loss for Data-imbalanced NLP Tasks", Sec. 5.1, QQP):
original, +positive, +negative, -negative and +positive & +negative
(:func:`table8_training_sets`).

In the paper the added examples are new sentences: "we first randomly chose
positive training examples in the original training set as templates. Then we
used Spacy to retrieve entity mentions and replace them with new ones by
linking mentions to their corresponding entities in DBpedia." The workbench's
stand-in is synonym replacement (:class:`SynonymAugmenter`: jieba words replaced
by synonyms from a ``SynonymTable``), usable as the ``augmenter`` of
:func:`upsample`, :func:`rebalance` and :func:`table8_training_sets`; without an
augmenter the added rows are exact copies (a labelled option, not the paper's
method).

All functions are seeded (``np.random.default_rng(seed)``, seed an integer
>= 0), leave the rows they keep in their original order and append new rows at
the end.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np
from datasets import Dataset, concatenate_datasets

from workbench.data.features import check_seed

if TYPE_CHECKING:
    from workbench.lexicon import SynonymTable
    from workbench.masking.segment import JiebaSegmenter


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
    """``ds`` plus ``n_extra`` rows copied from ``members`` in whole random passes
    (each member once before any twice); with ``augmenter`` the copies' text is augmented."""
    if n_extra == 0:
        return ds
    rng = np.random.default_rng(seed)
    passes = -(-n_extra // members.size)
    sources = np.concatenate([rng.permutation(members) for _ in range(passes)])[:n_extra]
    added = ds.select(sources)
    if augmenter is not None:
        columns = added.to_dict()
        columns["text"] = [_augmented(augmenter, text) for text in columns["text"]]
        added = Dataset.from_dict(columns, features=ds.features)
    return concatenate_datasets([ds, added])


def _augmented(augmenter: Augmenter, text: str) -> str:
    result = augmenter(text)
    if not isinstance(result, str):
        raise ValueError(f"augmenter: must return a str, got {type(result).__name__}")
    return result


def downsample(ds: Dataset, label: int, ratio: float | None = None, target: int | None = None, seed: int = 0) -> Dataset:
    """Keep a random subset of class ``label``: ``target`` examples, or ``round(ratio * n_label)``.

    Give exactly one of ``ratio`` (in (0, 1]) and ``target`` (in [0, n_label]).
    Other classes are untouched.
    """
    seed = check_seed(seed)
    members = _class_indices(ds, label)
    if (ratio is None) == (target is None):
        raise ValueError("ratio: give exactly one of ratio and target")
    if ratio is not None:
        if not 0.0 < ratio <= 1.0:
            raise ValueError(f"ratio: must be in (0, 1], got {ratio!r}")
        target = int(round(ratio * members.size))
    if not isinstance(target, int) or not 0 <= target <= members.size:
        raise ValueError(f"target: must be an integer in [0, {members.size}] (examples of label {label}), got {target!r}")
    return _drop_random(ds, members, members.size - target, seed)


def upsample(ds: Dataset, label: int, target: int, seed: int = 0, augmenter: Augmenter | None = None) -> Dataset:
    """Grow class ``label`` to ``target`` examples by appending ``target - n_label`` rows.

    Source rows are drawn from the class in whole random passes (every example
    is copied once before any is copied twice). The copies are exact
    duplicates or, with ``augmenter`` (a callable text -> text), have ``text``
    replaced by ``augmenter(text)`` (e.g. a :class:`SynonymAugmenter`).
    """
    seed = check_seed(seed)
    members = _class_indices(ds, label)
    if members.size == 0:
        raise ValueError(f"label: class {label} has no examples to upsample")
    if not isinstance(target, int) or target < members.size:
        raise ValueError(f"target: must be an integer >= {members.size} (examples of label {label}), got {target!r}")
    return _add_copies(ds, members, target - members.size, seed, augmenter)


def rebalance(
    ds: Dataset,
    target_ratio: float,
    positive_label: int = 1,
    method: str = "downsample",
    seed: int = 0,
    augmenter: Augmenter | None = None,
) -> Dataset:
    """Resample to ``n_positive / n_negative = target_ratio`` (negatives: every other class).

    ``method="downsample"`` removes random examples from the side with too many;
    ``"upsample"`` appends copies (or ``augmenter`` outputs) of the side with too
    few. Negatives are drawn uniformly across the negative classes; the new size
    of the resampled side is rounded to the nearest integer.
    """
    seed = check_seed(seed)
    if method not in METHODS:
        raise ValueError(f"method: must be one of {METHODS}, got {method!r}")
    if not target_ratio > 0:
        raise ValueError(f"target_ratio: must be > 0, got {target_ratio!r}")
    positives = _class_indices(ds, positive_label, "positive_label")
    negatives = np.setdiff1d(np.arange(len(ds)), positives)
    if positives.size == 0 or negatives.size == 0:
        raise ValueError(f"positive_label: need both positives and negatives, got {positives.size} and {negatives.size}")
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


def _check_n_words(n_words: int) -> int:
    if isinstance(n_words, bool) or not isinstance(n_words, (int, np.integer)) or n_words < 1:
        raise ValueError(f"n_words: must be an integer >= 1, got {n_words!r}")
    return int(n_words)


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
    """``text`` with ``n_words`` of its jieba words (fewer when fewer have synonyms) replaced by a synonym.

    The words to replace are drawn uniformly among the words that have
    synonyms in ``synonyms`` (every occurrence counts), and each gets one of
    its synonyms uniformly, all with ``np.random.default_rng(seed)``: the same
    text and seed give the same result. A text none of whose words has a
    synonym is returned unchanged (an exact copy).
    """
    return _replace_synonyms(text, synonyms, segmenter, np.random.default_rng(check_seed(seed)), _check_n_words(n_words))


class SynonymAugmenter:
    """An ``augmenter`` (text -> text) for :func:`upsample`, :func:`rebalance` and
    :func:`table8_training_sets`: each call returns :func:`synonym_replace` of the text.

    ``synonyms`` defaults to ``SynonymTable.default()`` (the tiny shipped Cilin
    lexicon), ``segmenter`` to ``JiebaSegmenter(pos=False)``. The i-th call
    (i = 0, 1, ...) draws with ``np.random.default_rng([seed, i])``, so copies of
    the same template made by successive calls differ, and the same seed with
    the same sequence of texts replays the same outputs (build a fresh
    augmenter to replay). A text with no word in the lexicon is kept
    unchanged, i.e. added as an exact copy: ``calls`` and ``unchanged`` count
    the calls and those copies, so a study can report the share.
    """

    def __init__(
        self,
        synonyms: SynonymTable | None = None,
        segmenter: JiebaSegmenter | None = None,
        seed: int = 0,
        n_words: int = 1,
    ) -> None:
        if synonyms is None:
            from workbench.lexicon import SynonymTable

            synonyms = SynonymTable.default()
        if segmenter is None:
            from workbench.masking.segment import JiebaSegmenter

            segmenter = JiebaSegmenter(pos=False)
        self.synonyms = synonyms
        self.segmenter = segmenter
        self.seed = check_seed(seed)
        self.n_words = _check_n_words(n_words)
        self.calls = 0
        self.unchanged = 0

    def __call__(self, text: str) -> str:
        rng = np.random.default_rng([self.seed, self.calls])
        self.calls += 1
        result = _replace_synonyms(text, self.synonyms, self.segmenter, rng, self.n_words)
        self.unchanged += result == text
        return result


# ----------------------------------------------------------------------------- Table 8


def table8_class_counts(n_positive: int, n_negative: int) -> OrderedDict[str, tuple[int, int]]:
    """``{setting: (positives, negatives)}`` of the Table 8 training sets built from
    n_p = ``n_positive`` positives and n_n = ``n_negative`` > n_p negatives
    (definitions in :func:`table8_training_sets`):

    original (n_p, n_n); +positive (n_n, n_n); +negative (n_p, 2 n_n - n_p);
    -negative (n_p, n_p); +positive & +negative (m, 2 n_n - m) with
    m = round(2 n_n * n_p / (n_p + n_n)).

    With QQP's counts (363,871 examples, 37% positive: n_p = 134,632,
    n_n = 229,239) +positive has 458,478 examples (paper: 458,477) and
    -negative 269,264 (paper: 269,165).
    """
    for name, value in (("n_positive", n_positive), ("n_negative", n_negative)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"{name}: must be an integer, got {value!r}")
    if not 0 < n_positive < n_negative:
        raise ValueError(
            f"n_positive: must be at least 1 and fewer than the negatives, got {n_positive} positives and {n_negative} negatives"
        )
    n_positive, n_negative = int(n_positive), int(n_negative)
    mixed_positives = int(round(2 * n_negative * n_positive / (n_positive + n_negative)))
    return OrderedDict(
        [
            ("original", (n_positive, n_negative)),
            ("+positive", (n_negative, n_negative)),
            ("+negative", (n_positive, 2 * n_negative - n_positive)),
            ("-negative", (n_positive, n_positive)),
            ("+positive & +negative", (mixed_positives, 2 * n_negative - mixed_positives)),
        ]
    )


def table8_training_sets(
    train: Dataset, seed: int, augmenter: Augmenter | None = None, positive_label: int = 1
) -> OrderedDict[str, Dataset]:
    """The five training sets of the Dice-loss paper's Table 8, in its order (``TABLE8_SETTINGS``).

    With n_p positives (label ``positive_label``; negatives: every other class)
    and n_n > n_p negatives, the paper's definitions (Sec. 5.1, QQP: 363,871
    examples, 37% positive) and the workbench's reading:

    * ``original``: "The original dataset" -- ``train`` unchanged;
    * ``+positive``: "We created a balanced dataset by adding positive
      examples. We first randomly chose positive training examples in the
      original training set as templates. [...] The augmented set contains
      458,477 examples, with 50% being positive and 50% being negative." --
      n_n - n_p positives added: n_n of each class;
    * ``+negative``: "We created a more imbalanced dataset. The size of the
      newly constructed training set and the data augmented technique are
      exactly the same as +negative, except that we chose negative training
      examples as templates." (the second "+negative" can only mean
      +positive) -- n_n - n_p negatives added, the size of +positive. The
      paper's "21% being positive and 79% being negative" does not follow from
      its own counts (134,632 of 458,477 is 29%); the sizes are followed;
    * ``-negative``: "We down-sampled negative examples in the original
      training set to get a balanced training set. The down-sampled set
      contains 269,165 examples, with 50% being positive" -- n_n - n_p random
      negatives removed: n_p of each class;
    * ``+positive & +negative``: "We augmented the original training data with
      additional positive and negative examples with the data distribution
      staying the same. The augmented dataset contains 458,477 examples, with
      50% being positive and 50% being negative." -- 50/50 at that size is
      +positive again and needs no added negative, so the workbench follows
      "the data distribution staying the same": the size of +positive (2 n_n)
      with the original share, round(2 n_n * n_p / (n_p + n_n)) positives and
      the rest negatives, both classes grown from their own templates.

    Added rows are ``augmenter(text)`` of templates drawn in whole random
    passes (:func:`upsample`): the paper's added examples are new sentences
    (entity replacement); pass e.g. a :class:`SynonymAugmenter`. With
    ``augmenter=None`` they are exact copies, the workbench's labelled
    fallback. Raises ValueError unless positives are present and fewer than
    the negatives, and for a bad ``seed``.
    """
    seed = check_seed(seed)
    positives = _class_indices(train, positive_label, "positive_label")
    negatives = np.setdiff1d(np.arange(len(train)), positives)
    if not 0 < positives.size < negatives.size:
        raise ValueError(
            f"train: must have fewer positives (label {positive_label}) than negatives and at least one, "
            f"got {positives.size} positives and {negatives.size} negatives"
        )
    counts = table8_class_counts(positives.size, negatives.size)
    n_positive, n_negative = counts["original"]

    def grow(ds: Dataset, members: np.ndarray, target: int) -> Dataset:
        # rows keep their positions when rows are appended, so ``members`` still index the originals
        return _add_copies(ds, members, target - members.size, seed, augmenter)

    sets: OrderedDict[str, Dataset] = OrderedDict(original=train)
    sets["+positive"] = grow(train, positives, counts["+positive"][0])
    sets["+negative"] = grow(train, negatives, counts["+negative"][1])
    sets["-negative"] = _drop_random(train, negatives, n_negative - n_positive, seed)
    mixed_positives, mixed_negatives = counts["+positive & +negative"]
    sets["+positive & +negative"] = grow(grow(train, positives, mixed_positives), negatives, mixed_negatives)
    return sets
