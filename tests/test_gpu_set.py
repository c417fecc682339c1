"""The ``gpu`` parameter sets as a user with a GPU box runs them (docs/gpu.md): the encoder chosen by ``--encoder`` (a
hub name, or any local checkpoint folder), the claims recorded as the ``results`` set records them, a machine without
CUDA refused before any kernel starts; and an fp32 copy of the set run end to end on a tiny local checkpoint and a tiny
data root built here (no internet, no GPU, no WORKBENCH_DATA needed)."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest
import torch
import yaml
from test_results_set import _data_root, _merged

from workbench.__main__ import main
from workbench.data import sample_corpus
from workbench.data_root import DATA_ROOT_ENV
from workbench.models import build_masked_lm
from workbench.runs import run
from workbench.runs.plan import PATH_KEYS, _named_paths, plan_executions
from workbench.runs.results import RESULTS_FILE
from workbench.vocab import load_tokenizer

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
HUB_ENCODER = "hfl/chinese-roberta-wwm-ext"  # the README's; planning needs no internet, a kernel downloads it


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """A tiny masked-LM checkpoint folder with its tokenizer, as a user's own encoder would be."""
    folder = tmp_path_factory.mktemp("encoder") / "tiny-zh"
    torch.manual_seed(0)
    build_masked_lm(tiny={"num_layers": 1, "hidden_size": 32, "num_heads": 2, "max_position": 64}).save_pretrained(
        folder
    )
    load_tokenizer().save_pretrained(str(folder))
    return folder


def _checkpoints(parameters: dict) -> list[str]:
    """Every model_name_or_path of an execution's parameters."""
    return [
        text
        for parameter, value in parameters.items()
        for name, kind, text in _named_paths(parameter, value, PATH_KEYS.get(parameter))
        if name.endswith("model_name_or_path")
    ]


@pytest.mark.parametrize("encoder", ["local", HUB_ENCODER])
def test_every_gpu_notebook_fine_tunes_the_encoder_given_and_records_claims_with_five_seeds(
    checkpoint, encoder, monkeypatch
):
    given = str(checkpoint) if encoder == "local" else encoder
    executions = plan_executions(NOTEBOOKS, ROOT / "params", "gpu", encoder=given)
    assert [execution.name for execution in executions] == [path.stem for path in NOTEBOOKS]
    for execution in executions:
        assert set(_checkpoints(execution.parameters)) == {given}, execution.name  # every encoder of the set
        assert execution.parameters["evidence"] is True and len(execution.parameters["seeds"]) >= 5, execution.name
    monkeypatch.chdir(checkpoint.parent)  # a folder given relative to where the command runs
    relative = plan_executions(NOTEBOOKS[:1], ROOT / "params", "gpu", encoder=checkpoint.name)
    assert _checkpoints(relative[0].parameters) == [str(checkpoint.resolve())]  # absolute: kernels run in notebooks/


@pytest.mark.parametrize(
    ("encoder", "params_set", "names"),
    [
        ("missing", "gpu", "--encoder 'missing': no such checkpoint folder"),
        ("empty", "gpu", "--encoder: must be a checkpoint folder (holding config.json)"),
        ("local", "class", "--encoder: the parameters of notebook 05_pcl_vs_dice_walkthrough.ipynb (set class)"),
    ],
    ids=["missing-folder", "no-checkpoint", "set-without-encoder"],
)
def test_an_encoder_that_is_no_checkpoint_or_a_set_without_one_is_refused(
    checkpoint, tmp_path, capsys, encoder, params_set, names
):
    (tmp_path / "empty").mkdir()
    given = {"missing": str(tmp_path / "missing"), "empty": str(tmp_path / "empty"), "local": str(checkpoint)}[encoder]
    argv = ["run", "--params-set", params_set, "--only", "05", "--encoder", given]
    folders = ["--notebooks-dir", str(ROOT / "notebooks"), "--params-dir", str(ROOT / "params")]
    assert main([*argv, *folders, "--outputs-dir", str(tmp_path / "outputs")]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: " + names.replace("'missing'", repr(given))) and error.count("\n") == 1, error
    assert not (tmp_path / "outputs").exists()


def test_a_machine_without_cuda_refuses_the_gpu_set_before_any_kernel_starts(checkpoint, tmp_path, monkeypatch, capsys):
    # the set ran into its kernel and failed at cell 31: "training.precision: bf16 needs a CUDA device"
    import workbench.runs

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(workbench.runs, "visible_gpus", lambda: [])
    monkeypatch.setenv(DATA_ROOT_ENV, str(tmp_path / "no-data"))  # the device is refused first, before the data
    argv = ["run", "--params-set", "gpu", "--encoder", str(checkpoint), "--outputs-dir", str(tmp_path / "outputs")]
    folders = ["--notebooks-dir", str(ROOT / "notebooks"), "--params-dir", str(ROOT / "params")]
    assert main([*argv, *folders]) == 2
    error = capsys.readouterr().err
    expected = "error: params file gpu/01_dice_loss.yaml: training.precision: bf16 needs a CUDA device"
    assert error.startswith(expected) and error.count("\n") == 1, error
    assert not (tmp_path / "outputs").exists()


def _gpu_data_root(folder: Path) -> Path:
    """The results set's tiny data root, plus what the gpu set reads besides: the wiki/web sample, the Chinese BERT
    vocabulary (here the package's small one, under its name) and WordNet's synsets."""
    root = _data_root(folder)
    with gzip.open(root / "corpus" / "wiki_web_sample.txt.gz", "wt", encoding="utf-8") as handle:
        handle.write("".join(sentence + "\n" for sentence in sample_corpus(120, seed=6)))
    (root / "vocab").mkdir()
    vocab = (ROOT / "workbench" / "resources" / "vocab.txt").read_text(encoding="utf-8")
    (root / "vocab" / "bert-base-chinese-vocab.txt").write_text(vocab, encoding="utf-8")
    (root / "wordnet").mkdir()
    synsets = "00001740-a\ta\table\tcapable\n00002098-a\ta\tunable\tincapable\n"
    (root / "wordnet" / "synsets.tsv").write_text(synsets, encoding="utf-8")
    return root


FP32 = {  # what makes each gpu file run here in seconds: fp32, one epoch, small caps; the rest is the set's own
    "01_dice_loss": {
        "data": {"max_train_samples": 200, "max_eval_samples": 100, "max_length": 32},
        "training": {"num_train_epochs": 1, "precision": "fp32", "learning_rate": 1.0e-3},
        "tversky_alphas": [0.3, 0.5],
    },
    "02_propensity_corrected_loss": {
        "data": {"max_train_samples": 200, "max_eval_samples": 100, "max_length": 32},
        "encoders": {
            "scratch": {
                "vocab_file": "$WORKBENCH_DATA/vocab/bert-base-chinese-vocab.txt",
                "tiny": {"num_layers": 1, "hidden_size": 32, "num_heads": 2},
            },
            "pre-trained": {"model_name_or_path": "../models/workbench-zh-mini"},
        },
        "training": {"num_train_epochs": 1, "precision": "fp32", "learning_rate": 1.0e-3},
    },
    "03_true_negatives": {
        "illustration_draws": 8,
        "data": {"max_train_samples": 40, "max_length": 32, "eval_fraction": 0.2},
        "heldout_texts": 20,
        "pretrain_training": {"num_train_epochs": 1, "per_device_train_batch_size": 20, "precision": "fp32"},
        "embedding": {"dim": 16, "min_count": 2},
        "finetune_data": {"max_train_samples": 64, "max_eval_samples": 32, "max_length": 32},
        "finetune_training": {"num_train_epochs": 1, "precision": "fp32"},
    },
    "04_auxiliary_labels": {
        "data": {"max_train_samples": 64, "max_eval_samples": 32, "max_length": 24},
        "training": {"num_train_epochs": 1, "precision": "fp32"},
        "aux": {"stage2_epochs": 1},
        "num_aux_values": [0, 2],
        "entropy_n_max": 8,
    },
    "05_pcl_vs_dice_walkthrough": {
        "data": {"max_train_samples": 200, "max_eval_samples": 100, "max_length": 32},
        "training": {"num_train_epochs": 1, "precision": "fp32", "learning_rate": 1.0e-3},
    },
}


@pytest.mark.slow
def test_the_gpu_set_in_fp32_runs_every_notebook_on_a_local_checkpoint_and_writes_the_results_page(
    checkpoint, tmp_path, monkeypatch
):
    monkeypatch.setenv(DATA_ROOT_ENV, str(_gpu_data_root(tmp_path / "data-root")))
    params = tmp_path / "params" / "gpu-fp32"
    params.mkdir(parents=True)
    for path in sorted((ROOT / "params" / "gpu").glob("*.yaml")):
        fp32 = _merged(yaml.safe_load(path.read_text(encoding="utf-8")), FP32[path.stem])
        (params / path.name).write_text(yaml.safe_dump(fp32, allow_unicode=True), encoding="utf-8")
    report = run(
        params_set="gpu-fp32",
        seeds=[0, 1],
        notebooks_dir=ROOT / "notebooks",
        params_dir=tmp_path / "params",
        outputs_dir=tmp_path / "outputs",
        run_id="gpu-fp32",
        stream=io.StringIO(),
        encoder=str(checkpoint),
    )
    assert {o.execution.name: f"cell {o.failed_cell}: {o.error}" for o in report.failed} == {}
    page = (report.run_dir / RESULTS_FILE).read_text(encoding="utf-8")
    for outcome in report.outcomes:
        evidence = json.loads((outcome.output_dir / "metrics.json").read_text(encoding="utf-8"))["evidence"]
        assert evidence["claims"], outcome.execution.name
        assert f"## {outcome.execution.name}: {evidence['title']}" in page
        params_file = yaml.safe_load((outcome.output_dir / "params.yaml").read_text(encoding="utf-8"))
        assert set(_checkpoints(params_file)) == {str(checkpoint)}, outcome.execution.name
