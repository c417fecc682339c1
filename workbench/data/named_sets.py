"""A named data set read from the data root: a data section without a path (``{source: qbqtc}``, docs/data.md).

:func:`root_splits` reads each split from its release file; a split whose file is absent (or that the release lacks)
is cut from a present file, with a warning and the cut in the provenance. :func:`root_corpus` gives the ``corpus``
data set's files present. Every file read goes through the data root's one checksum check
(:func:`workbench.data.root_files.checked_statuses`) and the rules of :mod:`workbench.data.split_files`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from datasets import DatasetDict

from workbench.config import DataConfig
from workbench.data.releases import release
from workbench.data.root_files import checked_statuses, present_files, warn_once
from workbench.data.split_files import (
    SPLIT_NAMES,
    check_every_class,
    check_training_file,
    cut_file,
    cut_record,
    read_section_file,
)
from workbench.data_root import data_root


def root_splits(data: DataConfig) -> tuple[DatasetDict, dict[str, Any]]:
    """The data set ``data.source`` from the data root: each split from its release file; a split whose file is
    absent (or that the release lacks, as TNEWS's labelled test) is cut from a present file (train's, else
    validation's, else test's) by ``data.split`` and ``data.seed``, with a warning (once per process) and the cut in the
    provenance."""
    item = release(data.source)
    root = data_root()
    wanted = [name for name, fraction in zip(SPLIT_NAMES, data.split) if fraction > 0]
    if "validation" not in wanted:
        raise ValueError(f"data.split: the validation fraction must be > 0, got {list(data.split)!r}")
    present = present_files(data.source, tuple(item.splits.values()), root)  # MissingDataError when none is there
    files = {name: present[item.splits[name]] for name in SPLIT_NAMES if item.splits.get(name) in present}
    labels = data.labels_path
    used = [item.file(path.name) for path in files.values()]  # the release's files this section reads
    if item.labels_file is not None and labels is None and item.file(item.labels_file).location(root).is_file():
        labels = str(item.file(item.labels_file).location(root))
        used.append(item.file(item.labels_file))
    read = {name: read_section_file(data, path, labels_path=labels) for name, path in files.items() if name in wanted}
    absent = [name for name in wanted if name not in files]
    record: dict[str, Any] = {
        "data_root": str(root),
        "missing": [file.path for file in item.files if file.name in item.splits.values() and file.name not in present],
        "checksums": checked_statuses(item, used, root),
        "splits": {name: {"file": str(files[name].relative_to(root))} for name in read},
    }
    donor = next(name for name in SPLIT_NAMES if name in files)  # the file the training split is read or cut from
    donor_data = read[donor] if donor in read else read_section_file(data, files[donor], labels_path=labels)
    check_training_file(donor_data, "data.source", files[donor])
    if not absent:
        check_every_class(read["train"], str(files["train"]), labels)
        return DatasetDict(read), record
    donor_file = str(files[donor].relative_to(root))
    parts = {
        name: fraction
        for name, fraction in zip(SPLIT_NAMES, data.split)
        if (name == donor and fraction > 0) or name in absent
    }
    cut = cut_file(data, donor_data, parts, donor_file)
    read.update(cut)
    for name in cut:
        record["splits"][name] = {"file": donor_file, "cut": cut_record(donor_file, parts, data.seed)}
    lacking = [name for name in absent if name not in item.splits]
    unfetched = [str(item.file(item.splits[name]).location(root)) for name in absent if name in item.splits]
    reasons = ([f"{', '.join(unfetched)} not in the data root"] if unfetched else []) + (
        [f"the release has no labelled {' or '.join(lacking)} split"] if lacking else []
    )
    fetch = f"; `{item.fetch_command}` adds the release's files" if unfetched else ""
    warn_once(
        f"data.source {data.source!r}: {' and '.join(reasons)}, so {donor_file} is cut into {', '.join(parts)} "
        f"(stratified by label, seed {data.seed}, in the shares of data.split {list(data.split)!r}){fetch}"
    )
    check_every_class(read["train"], str(files.get("train", files[donor])), labels)
    return DatasetDict({name: read[name] for name in SPLIT_NAMES if name in read}), record


def root_corpus() -> list[Path]:
    """The ``corpus`` data set's files present in the data root, in the release's order; a warning names absent ones."""
    present = present_files("corpus")  # MissingDataError when none is there
    item = release("corpus")
    checked_statuses(item, [item.file(name) for name in present], data_root())
    absent = [file.path for file in item.files if file.name not in present]
    if absent:
        warn_once(
            f"data.source 'corpus': {', '.join(absent)} not in the data root {data_root()}; reading "
            f"{', '.join(str(path) for path in present.values())} only"
        )
    return list(present.values())
