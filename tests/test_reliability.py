"""The bad inputs of docs/reliability.md's first tables, each run here: the case below with the row's id
(``losses-1``, ``data-3``, ...) gives the input, the exception type and the thing the message must name (the
wording is free to change: the doc's error column is an example). The cases are written here, not read from the
doc; the doc's rows and the cases share their ids. The "handled" and later rounds' rows name their own tests.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from test_train_runs import tiny_config

from workbench.data.fetch import FetchError
from workbench.data.root_files import MissingDataError

FIXTURES = Path(__file__).parent / "fixtures" / "notebooks"
GROUPS = ("losses", "data", "trainer", "runner", "masking", "widgets")


@dataclass(frozen=True)
class Case:
    """A bad input (run in a temporary folder), the exception it must raise and what the message must name."""

    run: Callable[[Path], Any]
    error: type[Exception]
    names: str


# ----------------------------------------------------------------------------- helpers


def _logits() -> torch.Tensor:
    return torch.zeros(2, 3)


def _loss(name: str, **params: Any) -> Any:
    from workbench.losses import build_loss

    return build_loss(name, **params)


def _write(path: Path, data: str | bytes) -> Path:
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data, encoding="utf-8")
    return path


def _splits(
    tmp_path: Path, content: str | bytes, source: str = "chnsenticorp", name: str = "data.tsv", **data: Any
) -> Any:
    from workbench.data import load_splits

    return load_splits({"source": source, "path": str(_write(tmp_path / name, content)), **data})


def _in_root(tmp_path: Path, call: Callable[[], Any], mirror: str | None = None) -> Any:
    """``call()`` with the data root (``$WORKBENCH_DATA``) an empty folder of ``tmp_path`` and the mirror ``mirror``."""
    import os

    names = ("WORKBENCH_DATA", "WORKBENCH_DATA_MIRROR")
    saved = {name: os.environ.pop(name, None) for name in names}
    os.environ["WORKBENCH_DATA"] = str(tmp_path / "root")
    if mirror is not None:
        os.environ["WORKBENCH_DATA_MIRROR"] = mirror
    try:
        return call()
    finally:
        for name, value in saved.items():
            os.environ.pop(name, None)
            if value is not None:
                os.environ[name] = value


def _fetch(tmp_path: Path, *names: str, mirror: dict[str, str] | None = None) -> Any:
    """``data fetch NAMES`` into an empty data root; ``mirror``: files served from a folder through file:// URLs."""
    import io

    from workbench.data.fetch import fetch

    for relative, text in (mirror or {}).items():
        (tmp_path / "mirror" / relative).parent.mkdir(parents=True, exist_ok=True)
        _write(tmp_path / "mirror" / relative, text)
    url = (tmp_path / "mirror").as_uri() if mirror is not None else None
    return _in_root(tmp_path, lambda: fetch(names, stream=io.StringIO()), mirror=url)


def _config(*overrides: str, base: dict | None = None) -> Any:
    from workbench.config import load_config

    return load_config(base or {}, overrides=list(overrides))


def _finetune(tmp_path: Path, **training: Any) -> Any:
    from workbench.train import finetune

    return finetune(tiny_config(tmp_path / "run", training=training))


def _checkpoint(folder: Path, step: int, weights: bool = True) -> None:
    path = folder / f"checkpoint-{step}"
    path.mkdir(parents=True)
    (path / "trainer_state.json").write_text("{}")
    if weights:
        (path / "model.safetensors").write_bytes(b"weights")


def _tokenizer() -> Any:
    from workbench.vocab import load_tokenizer

    return load_tokenizer()


def _features(*texts: str) -> list[dict]:
    from workbench.masking import JiebaSegmenter, encode_words

    return encode_words(_tokenizer(), list(texts), JiebaSegmenter())


def _collator(kind: str, **params: Any) -> Any:
    from workbench import masking

    return getattr(masking, kind)(_tokenizer(), **params)


def _params_file(tmp_path: Path, data: str | bytes) -> Any:
    from workbench.runs.params_sets import load_params

    (tmp_path / "default").mkdir()
    _write(tmp_path / "default" / "01_x.yaml", data)
    return load_params(tmp_path, "default", "01_x")


def _plan(tmp_path: Path, params: str = "", sweep: dict | None = None) -> Any:
    from workbench.runs.plan import plan_executions

    (tmp_path / "default").mkdir()
    _write(tmp_path / "default" / "ok_metrics.yaml", params)
    return plan_executions([FIXTURES / "ok_metrics.ipynb"], tmp_path, "default", sweep)


def _sweep(*specs: str) -> Any:
    from workbench.runs.options import parse_sweep

    return parse_sweep(specs)


def _seeds(text: str) -> Any:
    from workbench.runs.options import parse_seeds

    return parse_seeds(text)


def _run_into_existing(tmp_path: Path) -> Any:
    from workbench.runs import run

    (tmp_path / "taken").mkdir()
    (tmp_path / "default").mkdir()  # the params set: a missing one is an error of its own
    return run(
        only=["ok"],
        notebooks_dir=FIXTURES,
        params_dir=tmp_path,
        outputs_dir=tmp_path,
        run_id="taken",
        stream=io.StringIO(),
    )


def _viz(name: str) -> Any:
    from workbench import viz

    return getattr(viz, name)


def _slider(*args: Any, **kwargs: Any) -> Any:
    from workbench.viz.widgets import make_slider

    return make_slider(*args, **kwargs)


def _resume_with_only_incomplete_checkpoints(tmp_path: Path) -> Any:
    from workbench.train.run_folder import checkpoint_to_resume

    _checkpoint(tmp_path, 12, weights=False)
    with pytest.warns(UserWarning, match="incomplete checkpoint"):
        return checkpoint_to_resume(tmp_path, resume=True)


def _splits_from_config(*overrides: str) -> Any:
    from workbench.data import load_splits

    return load_splits(_config(*overrides).data)


def _loss_of_config(*overrides: str, base: dict) -> Any:
    spec = _config(*overrides, base=base).loss
    return _loss(spec.name, **spec.params)


def _resolve_without_a_class() -> Any:
    from workbench.config import LossSpec
    from workbench.data.features import build_dataset
    from workbench.train import loss_from_spec

    train = build_dataset({"text": ["a", "b", "c"], "label": [0, 0, 2]}, ("low", "mid", "high"))
    return loss_from_spec(LossSpec("wce"), train)


def _stratified(seed: int) -> Any:
    from workbench.data import sample_sentences, stratified_split

    return stratified_split(sample_sentences(n=30, seed=0), seed=seed)


def _load_file(path: Path) -> Any:
    from workbench.config import load_config

    return load_config(path)


def _occupied(tmp_path: Path, finished: bool) -> Any:
    from workbench.train.run_folder import checkpoint_to_resume

    if finished:
        (tmp_path / "metrics.json").write_text("{}")
    else:
        _checkpoint(tmp_path, 4)
    return checkpoint_to_resume(tmp_path, resume=False)


def _electra_sop() -> Any:
    from workbench.train import pretrain_electra

    return pretrain_electra({"task": "pretrain_electra", "objective": {"sop": True}})


def _encode(**params: Any) -> Any:
    from workbench.masking import JiebaSegmenter, encode_words

    return encode_words(_tokenizer(), ["我爱北京"], JiebaSegmenter(), **params)


def _compute_idf(texts: list) -> Any:
    from workbench.masking import compute_idf

    return compute_idf(texts)


# ----------------------------------------------------------------------------- the cases

TSV_ROWS = "".join(f"句子{i}\t{i % 2}\n" for i in range(40))

CASES: dict[str, Case] = {
    # losses
    "losses-1": Case(lambda tmp: _loss("focal", gamma=float("inf")), ValueError, "gamma"),
    "losses-2": Case(lambda tmp: _loss("dice", gamma=float("inf")), ValueError, "gamma"),
    "losses-3": Case(lambda tmp: _loss("tversky", alpha=float("inf")), ValueError, "alpha"),
    "losses-4": Case(lambda tmp: _loss("dice", ohem_ratio=float("inf")), ValueError, "ohem_ratio"),
    "losses-5": Case(lambda tmp: _loss("pcl", epsilon=float("nan"), label_counts=[1, 2, 3]), ValueError, "epsilon"),
    "losses-6": Case(lambda tmp: _loss("ls", epsilon=1.0), ValueError, "epsilon"),
    "losses-7": Case(lambda tmp: _loss("wce", label_counts="123"), ValueError, "label_counts"),
    "losses-8": Case(lambda tmp: _loss("wce", label_counts=[5, 0, 2]), ValueError, "label_counts"),
    "losses-9": Case(lambda tmp: _loss("focal", epsilon=0.1), ValueError, "focal"),
    "losses-10": Case(lambda tmp: _loss("cross_entropy"), ValueError, "cross_entropy"),
    "losses-11": Case(lambda tmp: _loss("ce")(_logits(), torch.tensor([0, 3])), ValueError, "labels"),
    "losses-12": Case(lambda tmp: _loss("ce")(_logits(), torch.tensor([0, 1, 2])), ValueError, "labels"),
    "losses-13": Case(lambda tmp: _loss("ce", reduction="avg"), ValueError, "reduction"),
    "losses-14": Case(
        lambda tmp: _loss("wce", label_counts=[1, 2])(_logits(), torch.tensor([0, 1])), ValueError, "label_counts"
    ),
    "losses-15": Case(lambda tmp: _loss("mlm_sr", weight=-1.0), ValueError, "weight"),
    # data
    "data-1": Case(lambda tmp: _splits(tmp, "", name="empty.tsv"), ValueError, "empty.tsv"),
    "data-2": Case(lambda tmp: _splits(tmp, "label\ttext_a\n1\t好\n0\t坏\n", name="few.tsv"), ValueError, "few.tsv"),
    "data-3": Case(lambda tmp: _splits(tmp, "label\ttext_a\n", name="header.tsv"), ValueError, "header.tsv"),
    "data-4": Case(
        lambda tmp: _splits(tmp, ("text\tlabel\n很好的酒店\t1\n" + TSV_ROWS).encode("gbk"), name="gbk.tsv"),
        ValueError,
        "gbk.tsv:2",
    ),
    "data-5": Case(
        lambda tmp: _splits(tmp, "text\tlabel\n" + TSV_ROWS + "坏\tbad\n", name="labels.tsv"),
        ValueError,
        "labels.tsv:42",
    ),
    "data-6": Case(
        lambda tmp: _splits(tmp, "text\tlabel\n句子\t1\textra\n", name="fields.tsv"), ValueError, "fields.tsv:2"
    ),
    "data-7": Case(
        lambda tmp: _splits(
            tmp, '{"query": "q", "title": "t", "label": "1"}\n{"query": \n', source="qbqtc", name="dev.json"
        ),
        ValueError,
        "dev.json:2",
    ),
    "data-8": Case(
        lambda tmp: _splits(tmp, "sentence,tag\n好,1\n", source="table", name="t.csv", text="text", label="tag"),
        ValueError,
        "t.csv:2",
    ),
    "data-9": Case(lambda tmp: _config("data.seed=-1"), ValueError, "data.seed"),
    "data-10": Case(
        lambda tmp: _splits_from_config("data.source=chnsenticorp", "data.path=/no/such/file.tsv"),
        ValueError,
        "data.path",
    ),
    "data-11": Case(lambda tmp: _config("data.max_eval_samples=0"), ValueError, "data.max_eval_samples"),
    "data-12": Case(lambda tmp: _resolve_without_a_class(), ValueError, "train split"),
    "data-13": Case(lambda tmp: _stratified(seed=-1), ValueError, "seed"),
    "data-14": Case(
        lambda tmp: _in_root(tmp, lambda: _splits_from_config("data.source=qbqtc")),
        MissingDataError,
        "python -m workbench data fetch qbqtc",
    ),
    "data-15": Case(
        lambda tmp: _fetch(tmp, "qbqtc", mirror={"qbqtc/train.json": "{}\n", "qbqtc/dev.json": "{}\n"}),
        FetchError,
        "qbqtc/dev.json",
    ),
    "data-16": Case(lambda tmp: _fetch(tmp, "qbqtcc"), ValueError, "'qbqtcc'"),
    "data-17": Case(lambda tmp: _fetch(tmp, "lcqmc"), FetchError, "icrc.hitsz.edu.cn"),
    # trainer
    "trainer-1": Case(lambda tmp: _config("training.learning_rate=.inf"), ValueError, "training.learning_rate"),
    "trainer-2": Case(lambda tmp: _config("training.seed=-1"), ValueError, "training.seed"),
    "trainer-3": Case(lambda tmp: _config("training.lrate=1e-4"), ValueError, "training.lrate"),
    "trainer-4": Case(
        lambda tmp: _load_file(_write(tmp / "broken.yaml", "task: finetune\ntraining:\n  learning_rate: [1e-3\n")),
        ValueError,
        "broken.yaml:3",
    ),
    "trainer-5": Case(
        lambda tmp: _load_file(_write(tmp / "gbk.yaml", "task: finetune\noutput_dir: 结果\n".encode("gbk"))),
        ValueError,
        "gbk.yaml:2",
    ),
    "trainer-6": Case(lambda tmp: _config("training.learning_rate=[1"), ValueError, "training.learning_rate=[1"),
    "trainer-7": Case(
        lambda tmp: _loss_of_config("loss.name=wce", base={"loss": {"name": "pcl", "params": {"epsilon": 0.1}}}),
        ValueError,
        "wce",
    ),
    "trainer-8": Case(lambda tmp: _occupied(tmp, finished=True), ValueError, "output_dir"),
    "trainer-9": Case(lambda tmp: _occupied(tmp, finished=False), ValueError, "output_dir"),
    "trainer-10": Case(lambda tmp: _resume_with_only_incomplete_checkpoints(tmp), ValueError, "output_dir"),
    "trainer-11": Case(
        lambda tmp: _finetune(tmp, learning_rate=1e30, max_grad_norm=0.0, warmup_steps=0.0),
        FloatingPointError,
        "step 2",
    ),
    "trainer-12": Case(
        lambda tmp: _finetune(
            tmp, per_device_train_batch_size=64, learning_rate=1e30, max_grad_norm=0.0, warmup_steps=0.0
        ),
        FloatingPointError,
        "step 1",
    ),
    "trainer-13": Case(lambda tmp: _electra_sop(), ValueError, "objective.sop"),
    # runner
    "runner-1": Case(lambda tmp: _sweep("x=[1,2"), ValueError, "--sweep x:1"),
    "runner-2": Case(lambda tmp: _sweep("epsilon=0.1,0.10"), ValueError, "--sweep epsilon"),
    "runner-3": Case(lambda tmp: _sweep("x=1", "x=2"), ValueError, "'x'"),
    "runner-4": Case(lambda tmp: _sweep("epsilon"), ValueError, "--sweep 'epsilon'"),
    "runner-5": Case(lambda tmp: _params_file(tmp, "x: 1\ny: [2\n"), ValueError, "01_x.yaml:2"),
    "runner-6": Case(lambda tmp: _params_file(tmp, "x: 1\n# 说明\n".encode("gbk")), ValueError, "01_x.yaml:2"),
    "runner-7": Case(lambda tmp: _params_file(tmp, "- 1\n- 2\n"), ValueError, "01_x.yaml"),
    "runner-8": Case(lambda tmp: _seeds("a,b"), ValueError, "--seeds"),
    "runner-9": Case(lambda tmp: _seeds("1,1"), ValueError, "--seeds"),
    "runner-10": Case(lambda tmp: _plan(tmp, "gamma: 1\n"), ValueError, "gamma"),
    "runner-11": Case(lambda tmp: _plan(tmp, "output_dir: /tmp\n"), ValueError, "output_dir"),
    "runner-12": Case(lambda tmp: _plan(tmp, sweep={"epsilon": [0.1]}), ValueError, "epsilon"),
    "runner-13": Case(lambda tmp: _run_into_existing(tmp), ValueError, "taken"),
    # masking
    "masking-1": Case(
        lambda tmp: _collator("WholeWordMaskCollator", mlm_probability=1.5), ValueError, "mlm_probability"
    ),
    "masking-2": Case(lambda tmp: _collator("WholeWordMaskCollator", max_ngram=0), ValueError, "max_ngram"),
    "masking-3": Case(lambda tmp: _collator("KnowledgeMaskCollator", entity_weight=-1.0), ValueError, "entity_weight"),
    "masking-4": Case(lambda tmp: _collator("KnowledgeMaskCollator", idf={"北京": -1.0}), ValueError, "idf"),
    "masking-5": Case(lambda tmp: _collator("RandomMaskCollator")([]), ValueError, "features"),
    "masking-6": Case(
        lambda tmp: _collator("WholeWordMaskCollator")(
            [{k: v for k, v in f.items() if k != "word_ids"} for f in _features("我爱北京")]
        ),
        ValueError,
        "word_ids",
    ),
    "masking-7": Case(lambda tmp: _encode(max_length=1), ValueError, "max_length"),
    "masking-8": Case(lambda tmp: _encode(text_pairs=["一", "二"]), ValueError, "text_pairs"),
    "masking-9": Case(lambda tmp: _config("masking.strategy=span"), ValueError, "masking.strategy"),
    "masking-10": Case(lambda tmp: _compute_idf([]), ValueError, "segmented_texts"),
    # widgets
    "widgets-1": Case(lambda tmp: _viz("EntropyPanel")(n_max=-3), ValueError, "n_max"),
    "widgets-2": Case(lambda tmp: _viz("EntropyPanel")(gamma=1.0), ValueError, "gamma"),
    "widgets-3": Case(
        lambda tmp: _viz("PclWeightsPanel")(label_counts=[1, 2], label_names=("a", "b", "c")),
        ValueError,
        "label_counts",
    ),
    "widgets-4": Case(lambda tmp: _viz("PclWeightsPanel")(label_counts="123"), ValueError, "label_counts"),
    "widgets-5": Case(lambda tmp: _viz("PclWeightsPanel")(epsilon=1.0), ValueError, "epsilon"),
    "widgets-6": Case(lambda tmp: _slider("delta"), ValueError, "delta"),
    "widgets-7": Case(lambda tmp: _viz("LossCurvePanel")([]), ValueError, "curves"),
    "widgets-8": Case(lambda tmp: _viz("EntropyPanel")(n_max=3).figure_for(gamma=1.0), ValueError, "gamma"),
}


TRAINING_CASES = {"trainer-11", "trainer-12"}  # run a tiny fine-tuning (seconds)


MINIMUM_CASES = {"losses": 15, "data": 17, "trainer": 13, "runner": 13, "masking": 10, "widgets": 8}
"""Each group's cases today: a group may grow, never shrink (docs/reliability.md's rows share their ids)."""


@pytest.mark.parametrize("group", GROUPS)
def test_every_group_holds_its_minimum_of_cases(group):
    cases = [case_id for case_id in CASES if case_id.split("-")[0] == group]
    assert len(cases) >= MINIMUM_CASES[group], f"{group}: {len(cases)} cases, fewer than {MINIMUM_CASES[group]}"


def test_every_case_belongs_to_a_group():
    assert sorted({case_id.split("-")[0] for case_id in CASES}) == sorted(GROUPS) == sorted(MINIMUM_CASES)


@pytest.mark.parametrize(
    "case_id",
    [pytest.param(case_id, marks=[pytest.mark.slow] if case_id in TRAINING_CASES else []) for case_id in CASES],
)
def test_a_bad_input_gets_the_documented_error(case_id, tmp_path):
    case = CASES[case_id]
    with pytest.raises(Exception) as caught:  # noqa: PT011 - the type is the case's, checked below
        case.run(tmp_path)
    message = str(caught.value)
    assert type(caught.value) is case.error, message
    assert case.names in message, f"the message does not name {case.names!r}: {message}"
