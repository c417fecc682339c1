"""docs/reliability.md stays true: every row of its table of bad inputs is run here.

Each row names a case below by its id (``losses-1``, ``data-3``, ...), the exception type and the
thing the message must name; the parametrised test runs the case and checks both (the wording is
free to change: the error column is an example). Rows and cases correspond one to one. The
"handled" table and the round-2 tables (``| `id` | input | behaviour | `tests/...::test` |``) name
the test that covers each row.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
from test_train_runs import tiny_config

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "reliability.md"
GROUPS = ("losses", "data", "trainer", "runner", "masking", "widgets")
FIXTURES = Path(__file__).parent / "fixtures" / "notebooks"
_ROW = re.compile(
    r"^\| `(?P<id>[a-z]+-\d+)` \| (?P<input>.+) \| `(?P<type>\w+): (?P<excerpt>.+)` \| `(?P<names>[^`]+)` \|$"
)
_HANDLED = re.compile(r"^\| (?P<input>.+) \| (?P<behaviour>.+) \| `(?P<test>tests/[\w/]+\.py::\w+)` \|$")
_TESTED = re.compile(r"^\| `(?P<id>[a-z0-9]+(?:-[a-z]+)*-\d+)` \| .+ \| `(?P<test>tests/[\w/]+\.py::\w+)` \|$")


@dataclass(frozen=True)
class Row:
    id: str
    type: str
    excerpt: str
    names: str


def _rows() -> list[Row]:
    text = DOC.read_text(encoding="utf-8") if DOC.is_file() else ""
    return [
        Row(m["id"], m["type"], m["excerpt"].replace("\\|", "|"), m["names"])
        for m in map(_ROW.match, text.splitlines())
        if m
    ]


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
    from workbench.runs.plan import load_params

    (tmp_path / "default").mkdir()
    _write(tmp_path / "default" / "01_x.yaml", data)
    return load_params(tmp_path, "default", "01_x")


def _plan(tmp_path: Path, params: str = "", sweep: dict | None = None) -> Any:
    from workbench.runs.plan import plan_executions

    (tmp_path / "default").mkdir()
    _write(tmp_path / "default" / "ok_metrics.yaml", params)
    return plan_executions([FIXTURES / "ok_metrics.ipynb"], tmp_path, "default", sweep)


def _sweep(*specs: str) -> Any:
    from workbench.runs.plan import parse_sweep

    return parse_sweep(specs)


def _seeds(text: str) -> Any:
    from workbench.runs.plan import parse_seeds

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

CASES: dict[str, Callable[[Path], Any]] = {
    # losses
    "losses-1": lambda tmp: _loss("focal", gamma=float("inf")),
    "losses-2": lambda tmp: _loss("dice", gamma=float("inf")),
    "losses-3": lambda tmp: _loss("tversky", alpha=float("inf")),
    "losses-4": lambda tmp: _loss("dice", ohem_ratio=float("inf")),
    "losses-5": lambda tmp: _loss("pcl", epsilon=float("nan"), label_counts=[1, 2, 3]),
    "losses-6": lambda tmp: _loss("ls", epsilon=1.0),
    "losses-7": lambda tmp: _loss("wce", label_counts="123"),
    "losses-8": lambda tmp: _loss("wce", label_counts=[5, 0, 2]),
    "losses-9": lambda tmp: _loss("focal", epsilon=0.1),
    "losses-10": lambda tmp: _loss("cross_entropy"),
    "losses-11": lambda tmp: _loss("ce")(_logits(), torch.tensor([0, 3])),
    "losses-12": lambda tmp: _loss("ce")(_logits(), torch.tensor([0, 1, 2])),
    "losses-13": lambda tmp: _loss("ce", reduction="avg"),
    "losses-14": lambda tmp: _loss("wce", label_counts=[1, 2])(_logits(), torch.tensor([0, 1])),
    "losses-15": lambda tmp: _loss("mlm_sr", weight=-1.0),
    # data
    "data-1": lambda tmp: _splits(tmp, "", name="empty.tsv"),
    "data-2": lambda tmp: _splits(tmp, "label\ttext_a\n1\t好\n0\t坏\n", name="few.tsv"),
    "data-3": lambda tmp: _splits(tmp, "label\ttext_a\n", name="header.tsv"),
    "data-4": lambda tmp: _splits(tmp, ("text\tlabel\n很好的酒店\t1\n" + TSV_ROWS).encode("gbk"), name="gbk.tsv"),
    "data-5": lambda tmp: _splits(tmp, "text\tlabel\n" + TSV_ROWS + "坏\tbad\n", name="labels.tsv"),
    "data-6": lambda tmp: _splits(tmp, "text\tlabel\n句子\t1\textra\n", name="fields.tsv"),
    "data-7": lambda tmp: _splits(
        tmp, '{"query": "q", "title": "t", "label": "1"}\n{"query": \n', source="qbqtc", name="dev.json"
    ),
    "data-8": lambda tmp: _splits(tmp, "sentence,tag\n好,1\n", source="table", name="t.csv", text="text", label="tag"),
    "data-9": lambda tmp: _config("data.seed=-1"),
    "data-10": lambda tmp: _splits_from_config("data.source=chnsenticorp", "data.path=/no/such/file.tsv"),
    "data-11": lambda tmp: _config("data.max_eval_samples=0"),
    "data-12": lambda tmp: _resolve_without_a_class(),
    "data-13": lambda tmp: _stratified(seed=-1),
    "data-14": lambda tmp: _in_root(tmp, lambda: _splits_from_config("data.source=qbqtc")),
    "data-15": lambda tmp: _fetch(tmp, "qbqtc", mirror={"qbqtc/train.json": "{}\n", "qbqtc/dev.json": "{}\n"}),
    "data-16": lambda tmp: _fetch(tmp, "qbqtcc"),
    "data-17": lambda tmp: _fetch(tmp, "lcqmc"),
    # trainer
    "trainer-1": lambda tmp: _config("training.learning_rate=.inf"),
    "trainer-2": lambda tmp: _config("training.seed=-1"),
    "trainer-3": lambda tmp: _config("training.lrate=1e-4"),
    "trainer-4": lambda tmp: _load_file(
        _write(tmp / "broken.yaml", "task: finetune\ntraining:\n  learning_rate: [1e-3\n")
    ),
    "trainer-5": lambda tmp: _load_file(_write(tmp / "gbk.yaml", "task: finetune\noutput_dir: 结果\n".encode("gbk"))),
    "trainer-6": lambda tmp: _config("training.learning_rate=[1"),
    "trainer-7": lambda tmp: _loss_of_config(
        "loss.name=wce", base={"loss": {"name": "pcl", "params": {"epsilon": 0.1}}}
    ),
    "trainer-8": lambda tmp: _occupied(tmp, finished=True),
    "trainer-9": lambda tmp: _occupied(tmp, finished=False),
    "trainer-10": lambda tmp: _resume_with_only_incomplete_checkpoints(tmp),
    "trainer-11": lambda tmp: _finetune(tmp, learning_rate=1e30, max_grad_norm=0.0, warmup_steps=0.0),
    "trainer-12": lambda tmp: _finetune(
        tmp, per_device_train_batch_size=64, learning_rate=1e30, max_grad_norm=0.0, warmup_steps=0.0
    ),
    "trainer-13": lambda tmp: _electra_sop(),
    # runner
    "runner-1": lambda tmp: _sweep("x=[1,2"),
    "runner-2": lambda tmp: _sweep("epsilon=0.1,0.10"),
    "runner-3": lambda tmp: _sweep("x=1", "x=2"),
    "runner-4": lambda tmp: _sweep("epsilon"),
    "runner-5": lambda tmp: _params_file(tmp, "x: 1\ny: [2\n"),
    "runner-6": lambda tmp: _params_file(tmp, "x: 1\n# 说明\n".encode("gbk")),
    "runner-7": lambda tmp: _params_file(tmp, "- 1\n- 2\n"),
    "runner-8": lambda tmp: _seeds("a,b"),
    "runner-9": lambda tmp: _seeds("1,1"),
    "runner-10": lambda tmp: _plan(tmp, "gamma: 1\n"),
    "runner-11": lambda tmp: _plan(tmp, "output_dir: /tmp\n"),
    "runner-12": lambda tmp: _plan(tmp, sweep={"epsilon": [0.1]}),
    "runner-13": lambda tmp: _run_into_existing(tmp),
    # masking
    "masking-1": lambda tmp: _collator("WholeWordMaskCollator", mlm_probability=1.5),
    "masking-2": lambda tmp: _collator("WholeWordMaskCollator", max_ngram=0),
    "masking-3": lambda tmp: _collator("KnowledgeMaskCollator", entity_weight=-1.0),
    "masking-4": lambda tmp: _collator("KnowledgeMaskCollator", idf={"北京": -1.0}),
    "masking-5": lambda tmp: _collator("RandomMaskCollator")([]),
    "masking-6": lambda tmp: _collator("WholeWordMaskCollator")(
        [{k: v for k, v in f.items() if k != "word_ids"} for f in _features("我爱北京")]
    ),
    "masking-7": lambda tmp: _encode(max_length=1),
    "masking-8": lambda tmp: _encode(text_pairs=["一", "二"]),
    "masking-9": lambda tmp: _config("masking.strategy=span"),
    "masking-10": lambda tmp: _compute_idf([]),
    # widgets
    "widgets-1": lambda tmp: _viz("EntropyPanel")(n_max=-3),
    "widgets-2": lambda tmp: _viz("EntropyPanel")(gamma=1.0),
    "widgets-3": lambda tmp: _viz("PclWeightsPanel")(label_counts=[1, 2], label_names=("a", "b", "c")),
    "widgets-4": lambda tmp: _viz("PclWeightsPanel")(label_counts="123"),
    "widgets-5": lambda tmp: _viz("PclWeightsPanel")(epsilon=1.0),
    "widgets-6": lambda tmp: _slider("delta"),
    "widgets-7": lambda tmp: _viz("LossCurvePanel")([]),
    "widgets-8": lambda tmp: _viz("EntropyPanel")(n_max=3).figure_for(gamma=1.0),
}


TRAINING_ROWS = {"trainer-11", "trainer-12"}  # run a tiny fine-tuning (seconds)

ROWS = _rows()


def test_the_table_has_40_rows_or_more_in_every_group():
    assert len(ROWS) >= 40
    assert sorted({row.id.split("-")[0] for row in ROWS}) == sorted(GROUPS)
    for group in GROUPS:
        assert f"\n## {group.capitalize()}\n" in DOC.read_text(encoding="utf-8"), group


def test_every_row_has_a_case_and_every_case_a_row():
    ids = [row.id for row in ROWS]
    assert len(ids) == len(set(ids))
    assert sorted(ids) == sorted(CASES)


@pytest.mark.parametrize(
    "row", [pytest.param(row, id=row.id, marks=[pytest.mark.slow] if row.id in TRAINING_ROWS else []) for row in ROWS]
)
def test_a_bad_input_gets_the_documented_error(row, tmp_path):
    with pytest.raises(Exception) as caught:  # noqa: PT011 - the type is the row's, checked below
        CASES[row.id](tmp_path)
    message = str(caught.value)
    assert type(caught.value).__name__ == row.type, message
    assert row.names in message, f"the message does not name {row.names!r}: {message}"


def test_each_handled_input_names_a_test_that_exists():
    handled = [m for m in map(_HANDLED.match, DOC.read_text(encoding="utf-8").splitlines()) if m]
    assert len(handled) >= 5
    for match in handled:
        path, name = match["test"].split("::")
        assert re.search(rf"^def {name}\(", (ROOT / path).read_text(encoding="utf-8"), re.MULTILINE), match["test"]


def test_each_round_2_row_names_a_test_that_exists():
    text = DOC.read_text(encoding="utf-8")
    tested = [m for m in map(_TESTED.match, text.splitlines()) if m]
    ids = [m["id"] for m in tested] + [row.id for row in ROWS]
    assert len(ids) == len(set(ids)), "row ids must be unique"
    for match in tested:
        assert match["id"].startswith(("r2-", "r3-")), match["id"]  # rounds 2 and 3
        path, name = match["test"].split("::")
        assert re.search(rf"^(async )?def {name}\(", (ROOT / path).read_text(encoding="utf-8"), re.MULTILINE), match[
            "test"
        ]
