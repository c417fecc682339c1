"""The ``data`` section: where the examples come from (a named data set or a file) and how they are cut."""

from __future__ import annotations

from dataclasses import dataclass

from workbench.checks import MAX_SEED, is_number
from workbench.config.sections import Section, check_field, option
from workbench.data.releases import releases_where

LABELLED_SOURCES = ("sample_relevance", "sample_sentences", *releases_where("labelled"), "table")
"""The sources of labelled splits: the generated samples, the labelled data sets of the data root, a table file."""
DATA_SOURCES = (
    "sample_relevance",
    "sample_sentences",
    "sample_corpus",
    *LABELLED_SOURCES[2:],
    *releases_where("texts"),
)
"""Every source of a data section: the labelled ones, the generated corpus and the corpora (a file, or the data
root's ``corpus``)."""
ORDINAL_SOURCES = ("sample_relevance", *releases_where("ordinal"))
"""The sources whose labels are ordered (``data.ordinal`` defaults to true for them)."""
BLOCK_BOUNDARIES = ("sentence", "word")


@dataclass(frozen=True)
class DataConfig(Section, prefix="data"):
    """Where the examples come from and how they are cut."""

    source: str = option(
        "sample_relevance", "docs/data.md's sources (sample_corpus, corpus: MLM only)", choices=DATA_SOURCES
    )
    path: str | list[str] | None = option(
        None,
        "a file source's file (train, or the only one, split); corpus: a list too; null: a named data set's files in "
        "the data root ($WORKBENCH_DATA, docs/data.md)",
    )
    validation_path: str | None = option(
        None, "a separate validation file (without it, path is cut by stratified_split)"
    )
    test_path: str | None = option(None, "a separate test file (with validation_path)")
    labels_path: str | None = option(None, "TNEWS labels.json")
    text: str | None = option(None, "table source: the text column")
    text_pair: str | None = option(None, "table source: the second text column (optional; pairs)")
    label: str | None = option(None, "table source: the label column")
    label_names: list[str] | None = option(
        None,
        "table source: the classes, in order (each label is a name, or with label_values a value); "
        "null: the training file's values, sorted",
    )
    label_values: list[str | int] | None = option(
        None,
        "table source, with label_names: the file's label of each class in that order ([1, 2, 3]: ratings from 1; "
        "[0, 1, 2]: indices); a number is never guessed to be an index",
    )
    ordinal: bool | None = option(
        None, "the labels are ordered (far-error rates, PCL); null: true for qbqtc, sample_relevance"
    )
    split: tuple[float, float, float] = option(
        (0.8, 0.1, 0.1), "train/validation/test shares of one file (test 0: none)"
    )
    seed: int = option(0, "seed of the sample generators and of the split", ge=0, le=MAX_SEED)
    max_length: int = option(128, "tokens per example (truncation), 8-512", ge=8, le=512)
    max_train_samples: int | None = option(
        None, "keep a stratified sample of N training examples (seed data.seed); corpus: the first N texts", ge=1
    )
    max_eval_samples: int | None = option(
        None, "keep a stratified sample of N validation and N test examples (seed data.seed)", ge=1
    )
    n_sentences: int = option(2000, "size of sample_corpus", ge=1)
    num_proc: int | None = option(
        None, "pretrain_*: processes that segment and encode the corpus; null: every core", ge=1
    )
    cache_dir: str | None = option(
        None, "pretrain_*: cache of encoded corpora; null: $WORKBENCH_CACHE or ~/.cache/workbench"
    )
    eval_fraction: float = option(
        0.01, "pretrain_*: share of the packed blocks held out for the eval loss", gt=0, le=0.5
    )
    block_boundary: str = option(
        "sentence", "pretrain_*: blocks end at a sentence end or at any word", choices=BLOCK_BOUNDARIES
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if isinstance(self.path, list | tuple):
            if self.source != "corpus" or not self.path:
                raise ValueError(
                    f"{self.key('path')}: must be one file (a list only for source corpus), got {self.path!r}"
                )
            object.__setattr__(self, "path", [check_field(self.key("path"), item, str) for item in self.path])
        else:
            object.__setattr__(self, "path", check_field(self.key("path"), self.path, str | None))
        split = self.split
        fractions = (
            isinstance(split, list | tuple) and len(split) == 3 and all(is_number(f) and 0 <= f <= 1 for f in split)
        )
        if not fractions or abs(sum(split) - 1.0) > 1e-6 or split[0] <= 0:
            raise ValueError(
                f"{self.key('split')}: must be three fractions in [0, 1] (train > 0) summing to 1, got {split!r}"
            )
        object.__setattr__(self, "split", tuple(float(f) for f in split))
        if self.test_path is not None and self.validation_path is None:
            raise ValueError(
                f"{self.key('test_path')}: needs {self.key('validation_path')} as well, got {self.test_path!r}"
            )
        names = self.label_names
        if names is not None:
            distinct = isinstance(names, list | tuple) and len(names) >= 2 and len(set(map(str, names))) == len(names)
            if self.source != "table" or not distinct:
                raise ValueError(
                    f"{self.key('label_names')}: must be two or more distinct names (source table), got {names!r}"
                )
            object.__setattr__(self, "label_names", [str(name) for name in names])
        values = self.label_values
        if values is not None:
            fits = isinstance(values, list | tuple) and names is not None and len(values) == len(names)
            if not fits or len({str(value) for value in values}) != len(values):
                raise ValueError(
                    f"{self.key('label_values')}: must be one distinct label per entry of "
                    f"{self.key('label_names')} ({names!r}), got {values!r}"
                )
            object.__setattr__(self, "label_values", list(values))

    @property
    def is_ordinal(self) -> bool:
        """``ordinal``, or its default: true for the sources in ``ORDINAL_SOURCES``."""
        return self.source in ORDINAL_SOURCES if self.ordinal is None else self.ordinal
