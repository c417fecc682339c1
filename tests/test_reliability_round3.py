"""Issue 30, the third hostile sweep: secrets kept out of every file written, YAML alias bombs refused, bounded hub
calls, interrupted runs told as such, honest sampling and evaluation, CSV malformations, full disks, TrainingArguments
the workbench cannot honour and data edge cases (docs/reliability.md, round 3). Each bad input: the exception type and
the key, file:line or URL its message names, or the files that survive."""

from __future__ import annotations

import contextlib
import errno
import http.server
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pandas as pd
import pytest
import torch
import yaml
from datasets import ClassLabel, Dataset, Features, Value
from nbformat.v4 import new_code_cell, new_notebook
from transformers import TrainerCallback

from workbench.__main__ import main as workbench_main
from workbench.config import load_config
from workbench.data import label_counts, label_names, load_splits, load_table, stratified_sample
from workbench.metrics_file import write_json
from workbench.redaction import is_secret, redact
from workbench.runs import plan_executions
from workbench.runs.plan import secret_environment
from workbench.train.__main__ import main as train_main
from workbench.train.run_folder import checkpoint_to_resume, claim_output_dir, hub_token
from workbench.train.trainer import training_arguments, write_failure
from workbench.vocab import clip_texts, load_tokenizer
from workbench.yaml_files import MAX_ALIASED_VALUES, read_yaml, read_yaml_file

ROOT = Path(__file__).resolve().parents[1]
TINY = {"num_layers": 1, "hidden_size": 32, "num_heads": 2}
SECRET = "hf_ROUND3SECRETTOKEN"


def tiny_config(output_dir, **sections) -> dict:
    """A finetune config of seconds on the generated relevance pairs (64 training, 32 evaluation examples)."""
    config = {
        "output_dir": str(output_dir),
        "data": {"source": "sample_relevance", "max_train_samples": 64, "max_eval_samples": 32, "max_length": 32},
        "model": {"tiny": TINY},
        "training": {
            "num_train_epochs": 1,
            "per_device_train_batch_size": 16,
            "per_device_eval_batch_size": 32,
            "learning_rate": 1e-3,
            "quiet": True,
            "logging_steps": 2,
        },
    }
    for name, values in sections.items():
        config[name] = {**config.get(name, {}), **values}
    return config


def files_holding(folder: Path, text: str) -> list[str]:
    """The files under ``folder`` whose bytes hold ``text``."""
    return sorted(
        str(path.relative_to(folder))
        for path in folder.rglob("*")
        if path.is_file() and text.encode() in path.read_bytes()
    )


def write_csv(path: Path, lines: list[str], header: str = "text,label") -> Path:
    path.write_text("\n".join([header, *lines]) + "\n", encoding="utf-8")
    return path


def table(path: Path, **data) -> dict:
    return {"source": "table", "path": str(path), "text": "text", "label": "label", **data}


# ----------------------------------------------------------------------------- 1. secrets


def test_redact_replaces_every_secret_at_any_depth_and_nothing_else():
    tree = {
        "training": {"hub_token": SECRET, "learning_rate": 0.1},
        "api_key": "k",
        "nested": [{"client_secret": "s", "db_password": "p", "token": "t"}],
        "pad_token": "[PAD]",  # a tokenizer's special token, not a secret
        "heldout_prediction_rate_token": 0.5,  # a number under a *_token name: a metric
        "max_tokens": 3,
        "hub_model_id": None,
    }
    assert redact(tree) == {
        "training": {"hub_token": "<HUB_TOKEN>", "learning_rate": 0.1},
        "api_key": "<API_KEY>",
        "nested": [{"client_secret": "<CLIENT_SECRET>", "db_password": "<DB_PASSWORD>", "token": "<TOKEN>"}],
        "pad_token": "[PAD]",
        "heldout_prediction_rate_token": 0.5,
        "max_tokens": 3,
        "hub_model_id": None,
    }
    assert [
        key for key in ("hub_token", "AWS_SECRET_ACCESS_KEY", "apikey", "tokens", "tokenizer") if is_secret(key)
    ] == [
        "hub_token",
        "AWS_SECRET_ACCESS_KEY",
        "apikey",
    ]


def test_a_config_shows_no_token_and_the_trainer_gets_it_as_hf_token_only(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    config = load_config(tiny_config(tmp_path / "run", training={"hub_token": SECRET}))
    assert SECRET not in repr(config) and SECRET not in repr(config.training)
    assert training_arguments(config.training, str(tmp_path / "run"), evaluate=True).hub_token is None
    with hub_token(config.training.hub_token):
        assert os.environ["HF_TOKEN"] == SECRET
    assert "HF_TOKEN" not in os.environ
    monkeypatch.setenv("HF_TOKEN", "hf_from_the_environment")
    with hub_token("<HUB_TOKEN>"):  # the mark a written config shows: the environment's token stays
        assert os.environ["HF_TOKEN"] == "hf_from_the_environment"


def test_run_config_yaml_holds_the_mark_and_resume_with_another_token_is_allowed(tmp_path):
    config = load_config(tiny_config(tmp_path / "run", training={"hub_token": SECRET}))
    claim_output_dir(config).close()
    written = yaml.safe_load((tmp_path / "run" / "run_config.yaml").read_text(encoding="utf-8"))
    assert written["training"]["hub_token"] == "<HUB_TOKEN>" and files_holding(tmp_path, SECRET) == []
    again = load_config(tiny_config(tmp_path / "run", training={"hub_token": "hf_renewed", "resume": True}))
    claim_output_dir(again).close()  # a token is no part of the run's results


def test_metrics_json_written_by_a_notebook_holds_no_secret(tmp_path):
    write_json(tmp_path / "metrics.json", {"metrics": {"f1": 0.5}, "parameters": {"training": {"hub_token": SECRET}}})
    assert files_holding(tmp_path, SECRET) == []
    assert json.loads((tmp_path / "metrics.json").read_text())["parameters"]["training"]["hub_token"] == "<HUB_TOKEN>"


@pytest.mark.slow
def test_a_run_given_a_hub_token_writes_it_into_no_file(tmp_path, monkeypatch):
    from workbench.train import finetune

    monkeypatch.delenv("HF_TOKEN", raising=False)
    result = finetune(tiny_config(tmp_path / "run", training={"hub_token": SECRET, "keep_checkpoints": True}))
    assert files_holding(tmp_path / "run", SECRET) == []  # run_config.yaml, metrics.json, training_args.bin (x2)
    assert SECRET not in repr(result)
    for folder in (tmp_path / "run", Path(result.best_checkpoint)):
        assert torch.load(folder / "training_args.bin", weights_only=False).hub_token is None
    assert result.metrics["parameters"]["training"]["hub_token"] == "<HUB_TOKEN>"
    assert "HF_TOKEN" not in os.environ


def _notebook(path: Path, parameters: str, body: str) -> Path:
    notebook = new_notebook(
        cells=[new_code_cell(parameters, metadata={"tags": ["parameters"]}), new_code_cell(body)],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )
    nbformat.write(notebook, path)
    return path


def _params(tmp_path: Path, stem: str, text: str) -> Path:
    folder = tmp_path / "params" / "default"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{stem}.yaml").write_text(text, encoding="utf-8")
    return tmp_path / "params"


@pytest.mark.parametrize(
    ("params_text", "sweep", "names"),
    [
        ("training: {api_key: abc}", None, "'training.api_key' holds a secret"),
        ("password: abc", None, "'password' holds a secret"),
        ("training: {hub_token: a}\nother: {hub_token: b}", None, "different hub tokens"),
        ("", {"training": [{"hub_token": SECRET}]}, "--sweep: a secret (training.hub_token)"),
    ],
)
def test_the_runner_refuses_a_secret_it_cannot_hand_over_unwritten(tmp_path, params_text, sweep, names):
    notebook = _notebook(tmp_path / "nb.ipynb", "training = {}\nother = {}\npassword = None\noutput_dir = None", "pass")
    params = _params(tmp_path, "nb", params_text)
    with pytest.raises(ValueError, match=re.escape(names)):
        plan_executions([notebook], params, "default", sweep)


def test_a_hub_token_parameter_reaches_the_kernel_as_hf_token():
    parameters = {"training": {"hub_token": SECRET}, "pretrain_training": {"hub_token": SECRET}}
    assert secret_environment(parameters) == {"HF_TOKEN": SECRET}
    assert secret_environment({"training": {"hub_token": "<HUB_TOKEN>"}}) == {}  # the mark: the runner's own token


@pytest.mark.slow
def test_a_runner_run_writes_the_token_nowhere_and_the_notebook_gets_it(tmp_path):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    body = (
        "import os\nfrom workbench.runs import write_metrics\n"
        f"write_metrics(output_dir, {{'has_token': float(os.environ.get('HF_TOKEN', '')[-11:] == {SECRET[-11:]!r})}}, "
        "parameters={'training': training})\nprint(training)"
    )
    _notebook(notebooks / "nb.ipynb", "training = {}\noutput_dir = None", body)
    params = _params(tmp_path, "nb", f"training: {{hub_token: {SECRET}, learning_rate: 0.1}}")
    options = ["--notebooks-dir", str(notebooks), "--params-dir", str(params), "--outputs-dir", str(tmp_path / "out")]
    assert workbench_main(["run", *options, "--run-id", "r"]) == 0
    folder = tmp_path / "out" / "r"
    assert files_holding(folder, SECRET) == []  # params.yaml, the executed notebook, its page, metrics.json, index
    recorded = json.loads((folder / "nb" / "metrics.json").read_text())
    assert recorded["metrics"]["has_token"] == 1.0 and recorded["parameters"]["training"]["hub_token"] == "<HUB_TOKEN>"
    assert "&lt;HUB_TOKEN&gt;" in (folder / "nb" / "nb.html").read_text(encoding="utf-8")  # the printed parameter


# ----------------------------------------------------------------------------- 3. YAML alias bombs, SIGTERM


BOMB = "\n".join(
    [
        'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
        *(f"{name}: &{name} [{','.join([f'*{before}'] * 9)}]" for before, name in zip("abcde", "bcdef")),
    ]
)


@pytest.mark.parametrize(
    ("text", "names"),
    [
        (BOMB, "bomb.yaml:6: invalid YAML (its aliases expand it to 672,610 values"),
        ("a: &a [*a]", "bomb.yaml:1: invalid YAML (an alias refers to a value holding it)"),
        ("[" * 2000 + "]" * 2000, "bomb.yaml: invalid YAML (nested too deeply"),
    ],
)
def test_a_yaml_alias_bomb_is_refused_naming_file_and_line(tmp_path, text, names):
    (tmp_path / "bomb.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=f"^{re.escape(str(tmp_path / names))}"):
        read_yaml_file(tmp_path / "bomb.yaml", "params file")


def test_aliases_that_expand_modestly_and_merge_keys_still_load():
    assert read_yaml("base: &b {lr: 1, wd: 2}\nrun: {<<: *b, lr: 3}", "c.yaml") == {
        "base": {"lr": 1, "wd": 2},
        "run": {"lr": 3, "wd": 2},
    }
    wide = "a: &a [" + ",".join(["1"] * 1000) + "]\nb: [" + ",".join(["*a"] * 99) + "]"
    assert len(read_yaml(wide, "w.yaml")["b"]) == 99  # 99,000 aliased values: within MAX_ALIASED_VALUES
    assert 99 * 1000 <= MAX_ALIASED_VALUES


@pytest.mark.parametrize("where", ["config", "params", "override"])
def test_an_alias_bomb_is_refused_wherever_yaml_is_read(tmp_path, where):
    if where == "config":
        (tmp_path / "c.yaml").write_text(BOMB, encoding="utf-8")
        with pytest.raises(ValueError, match=r"c\.yaml:6: invalid YAML"):
            load_config(tmp_path / "c.yaml")
    elif where == "params":
        notebook = _notebook(tmp_path / "nb.ipynb", "a = b = c = d = e = f = None\noutput_dir = None", "pass")
        with pytest.raises(ValueError, match=r"nb\.yaml:6: invalid YAML"):
            plan_executions([notebook], _params(tmp_path, "nb", BOMB), "default")
    else:
        bomb = "[" + ",".join(["&a [" + ",".join(["x"] * 400) + "]", *["*a"] * 400]) + "]"
        with pytest.raises(ValueError, match=r"^overrides: cannot parse the value of 'training\.x="):
            load_config(None, [f"training.x={bomb}"])


@pytest.mark.slow
def test_sigterm_during_an_export_stops_the_runner_at_once(tmp_path):
    notebooks, marker = tmp_path / "notebooks", tmp_path / "exporting"
    notebooks.mkdir()
    _notebook(notebooks / "nb.ipynb", "output_dir = None", "pass")
    (tmp_path / "params" / "default").mkdir(parents=True)
    script = (
        "import importlib, pathlib, sys, time\nexecute = importlib.import_module('workbench.runs.execute')\n"
        f"def slow_export(notebook, run_dir=None):\n    pathlib.Path({str(marker)!r}).write_text('x')\n"
        "    time.sleep(600)\n"
        "execute.export_html = slow_export\nfrom workbench.__main__ import main\nsys.exit(main(sys.argv[1:]))"
    )
    options = ["--notebooks-dir", str(notebooks), "--params-dir", str(tmp_path / "params")]
    command = [sys.executable, "-c", script, "run", *options, "--outputs-dir", str(tmp_path / "out"), "--run-id", "r"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not marker.exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.1)
    assert marker.exists(), process.communicate()[1]
    stopped = time.monotonic()
    process.send_signal(signal.SIGTERM)
    _, error = process.communicate(timeout=60)
    assert process.returncode == 130 and time.monotonic() - stopped < 30, error
    assert "Interrupted" in (tmp_path / "out" / "r" / "index.html").read_text(encoding="utf-8")


# ----------------------------------------------------------------------------- 4. the hub within bounded time


class _NotFound(http.server.BaseHTTPRequestHandler):
    def _answer(self) -> None:
        body = b'{"error": "Repository not found"}'
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Error-Code", "RepoNotFound")
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_HEAD = do_POST = do_PUT = _answer

    def log_message(self, *args) -> None:
        return


@contextlib.contextmanager
def _local_hub(kind: str):
    """A local hub at 127.0.0.1 that accepts connections and never answers (``silent``), or answers 404 to
    everything; yields its endpoint."""
    if kind == "silent":
        server = socket.create_server(("127.0.0.1", 0))
        connections = []
        accepting = threading.Thread(target=lambda: [connections.append(server.accept()) for _ in iter(int, 1)])
        accepting.daemon = True
        accepting.start()
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
        server.close()
    else:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _NotFound)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        yield f"http://127.0.0.1:{server.server_address[1]}"
        server.shutdown()


@pytest.fixture(params=["silent", "404"])
def hub(request):
    """A local hub that never answers, or answers 404 to everything: (kind, endpoint)."""
    with _local_hub(request.param) as endpoint:
        yield request.param, endpoint


def test_a_hub_model_name_names_its_key_and_the_endpoint_within_the_timeout(hub, monkeypatch):
    from huggingface_hub import constants

    kind, endpoint = hub
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    monkeypatch.setenv("WORKBENCH_HUB_TIMEOUT", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # read once, when huggingface_hub is imported
    what = "did not answer within 1 s" if kind == "silent" else "has no such model"
    for key in ("model.model_name_or_path", "aux.fusion_model"):
        start = time.monotonic()
        with pytest.raises(ValueError, match=rf"^{key}: 'someorg/{kind}-model' is no local folder, and the hub at "):
            load_tokenizer(f"someorg/{kind}-model", key=key)
        assert time.monotonic() - start < 10
    with pytest.raises(ValueError, match=rf"the hub at {endpoint} {what}"):
        load_tokenizer(f"someorg/{kind}-model")


def test_the_workbench_leaves_huggingface_hubs_shared_session_as_it_is(hub, monkeypatch):
    # issue 39: no hook on the session every caller in the process shares, and no client factory of the workbench's;
    # the look-up is bounded by the timeout it passes to its own call
    import ast
    import inspect

    from huggingface_hub import constants, get_session

    import workbench

    kind, endpoint = hub
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    monkeypatch.setenv("WORKBENCH_HUB_TIMEOUT", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    session = get_session()
    hooks = {name: list(found) for name, found in session.event_hooks.items()}
    timeout = session.timeout
    with pytest.raises(ValueError, match=rf"^model.model_name_or_path: 'someorg/{kind}-model' is no local folder"):
        load_tokenizer(f"someorg/{kind}-model")
    assert get_session() is session and session.timeout == timeout
    assert {name: list(found) for name, found in session.event_hooks.items()} == hooks
    for module in Path(workbench.__file__).parent.rglob("*.py"):  # no code of the package reaches the session
        tree = ast.parse(module.read_text(encoding="utf-8"))
        used = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
        used |= {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        used |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names}
        assert not used & {"get_session", "set_client_factory", "event_hooks"}, module
    assert "timeout=seconds" in inspect.getsource(workbench.hub._look_up.__wrapped__)


@pytest.fixture
def failing_hub():
    """A local hub that answers 404 to everything. A push to one that never answers runs with huggingface_hub's own
    defaults, which bound none of its API calls (docs/training.md): the workbench does not change them (issue 39)."""
    with _local_hub("404") as endpoint:
        yield endpoint


@pytest.mark.slow
def test_push_to_hub_against_a_hub_that_fails_is_one_line_naming_the_key(failing_hub, tmp_path):
    endpoint = failing_hub
    config = tmp_path / "c.yaml"
    training = {"push_to_hub": True, "hub_model_id": "me/model"}
    config.write_text(yaml.safe_dump({"task": "finetune", **tiny_config(tmp_path / "run", training=training)}))
    env = {**os.environ, "HF_ENDPOINT": endpoint, "WORKBENCH_HUB_TIMEOUT": "1", "HF_TOKEN": "hf_x"}
    env.pop("HF_HUB_OFFLINE", None)
    command = [sys.executable, "-m", "workbench.train", str(config)]
    start = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1].startswith(f"error: training.push_to_hub: the hub at {endpoint} ")
    assert time.monotonic() - start < 120
    assert not (tmp_path / "run" / "metrics.json").exists()


# ----------------------------------------------------------------------------- 5. interrupted runs


class _SigtermAtStep(TrainerCallback):
    """Sends this process SIGTERM at ``step`` and waits past the JIT checkpoint's grace period (3 s)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(4)


@pytest.mark.slow
def test_a_run_stopped_by_sigterm_keeps_its_checkpoint_writes_no_result_and_resumes(tmp_path):
    from workbench.train import finetune
    from workbench.train.trainer import TrainingInterrupted

    training = {"num_train_epochs": 2, "enable_jit_checkpoint": True, "save_total_limit": 3}
    with pytest.raises(
        TrainingInterrupted, match=r"^training was stopped by SIGTERM at step \d \(epoch 0\.\d+ of 2\)"
    ) as stop:
        finetune(tiny_config(tmp_path / "run", training=training), callbacks=[_SigtermAtStep(2)])
    step = re.search(r"at step (\d)", str(stop.value)).group(1)  # the step after the signal's grace period
    run = tmp_path / "run"
    assert not (run / "metrics.json").exists() and not (run / "config.json").exists()
    assert f"checkpoint-{step}" in [path.name for path in run.glob("checkpoint-*")]  # the newest, resumed from
    result = finetune(tiny_config(tmp_path / "run", training={**training, "resume": True}))
    assert (run / "metrics.json").is_file() and result.history[-1]["step"] == 8


def test_the_train_command_exits_130_for_an_interrupted_run(tmp_path, monkeypatch, capsys):
    from workbench.train import finetuning
    from workbench.train.trainer import TrainingInterrupted

    def interrupted(config):
        raise TrainingInterrupted("training was stopped by SIGTERM at step 2")

    monkeypatch.setattr(finetuning, "finetune", interrupted)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({"task": "finetune"}))
    assert train_main([str(tmp_path / "c.yaml")]) == 130
    assert capsys.readouterr().err == "interrupted: training was stopped by SIGTERM at step 2\n"


# ----------------------------------------------------------------------------- 6. sampling


def _sorted_by_label(path: Path, counts: dict[str, int]) -> Path:
    return write_csv(path, [f"text {label} {i},{label}" for label, count in counts.items() for i in range(count)])


def test_max_train_samples_keeps_every_class_of_a_file_sorted_by_label(tmp_path):
    path = _sorted_by_label(tmp_path / "sorted.csv", {"rare": 20, "mid": 100, "major": 280})
    data = table(path, max_train_samples=40, max_eval_samples=10, label_names=["major", "mid", "rare"])
    splits = load_splits(data)
    assert label_counts(splits["train"]) == [28, 10, 2]  # the shares of the 320 training rows, 280 : 100 : 20
    assert sum(label_counts(splits["validation"])) == 10 and min(label_counts(splits["validation"])) >= 1
    again, other = load_splits(data), load_splits({**data, "seed": 1})
    assert again["train"]["text"] == splits["train"]["text"]  # seeded by data.seed
    assert other["train"]["text"] != splits["train"]["text"]


def test_stratified_sample_keeps_order_proportions_and_a_rare_class():
    labels = [0] * 90 + [1] * 9 + [2] * 1
    ds = Dataset.from_dict(
        {"text": [str(i) for i in range(100)], "label": labels},
        features=Features({"text": Value("string"), "label": ClassLabel(names=["a", "b", "c"])}),
    )
    sample = stratified_sample(ds, 20, seed=3)
    assert label_counts(sample) == [17, 2, 1]  # 18 : 1.8 : 0.2, the rare class kept with one from the largest
    assert [int(text) for text in sample["text"]] == sorted(int(text) for text in sample["text"])
    assert stratified_sample(ds, 100) is ds and stratified_sample(ds, 500) is ds


def test_pretraining_texts_of_a_sorted_file_come_from_every_class_and_the_held_out_ones_are_unseen(tmp_path):
    from workbench.data import load_texts
    from workbench.studies.true_negatives.hard_correction import heldout_texts

    path = _sorted_by_label(tmp_path / "sorted.csv", {"neg": 50, "pos": 50})
    data = table(path, max_train_samples=20)
    texts, _ = load_texts(data)
    held_out = heldout_texts(data, 10)
    assert len(texts) == 20 and {text.split()[1] for text in texts} == {"neg", "pos"}
    assert not set(texts) & set(held_out)  # notebook 03 scores its held-out texts on text pre-training never saw


# ----------------------------------------------------------------------------- 7. ordinal text labels


def test_ordinal_text_labels_need_their_order(tmp_path):
    path = write_csv(tmp_path / "o.csv", [f"t{i},{label}" for i, label in enumerate(["low", "mid", "high"] * 10)])
    with pytest.raises(ValueError, match=rf"^data\.label_names: data\.ordinal is true but the labels of '{path}'"):
        load_splits(table(path, ordinal=True))
    assert label_names(load_splits(table(path, ordinal=True, label_names=["low", "mid", "high"]))["train"]) == [
        "low",
        "mid",
        "high",
    ]
    numbers = write_csv(tmp_path / "n.csv", [f"t{i},{label}" for i, label in enumerate([1, 2, 10] * 10)])
    assert label_names(load_splits(table(numbers, ordinal=True))["train"]) == ["1", "2", "10"]  # by value


# ----------------------------------------------------------------------------- 8. evaluation reads every row


@pytest.mark.slow
def test_dataloader_drop_last_never_drops_evaluation_rows(tmp_path):
    from workbench.train import finetune

    rows = [f"文本{i},{i % 2}" for i in range(40)]
    train = write_csv(tmp_path / "train.csv", rows)
    dev, test = (
        write_csv(tmp_path / f"{name}.csv", [f"{name}{i},{i % 2}" for i in range(9)]) for name in ("dev", "test")
    )
    data = table(train, validation_path=str(dev), test_path=str(test), max_train_samples=None, max_eval_samples=None)
    training = {"dataloader_drop_last": True, "per_device_eval_batch_size": 8}
    result = finetune(tiny_config(tmp_path / "run", data=data, training=training))
    assert result.metrics["num_examples"] == 9 and len(pd.read_csv(tmp_path / "run" / "predictions.csv")) == 9


# ----------------------------------------------------------------------------- 9. save_only_model and resume


def test_resume_with_save_only_model_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"^training\.save_only_model: a run saved with it cannot be resumed"):
        load_config({"training": {"save_only_model": True, "resume": True}})
    load_config({"training": {"save_only_model": True}})  # a run that is not resumed may save only the model


def test_resuming_from_a_checkpoint_without_optimizer_state_is_refused(tmp_path):
    checkpoint = tmp_path / "checkpoint-4"
    checkpoint.mkdir()
    (checkpoint / "trainer_state.json").write_text("{}")
    (checkpoint / "model.safetensors").write_bytes(b"weights")
    with pytest.raises(ValueError, match=rf"^training\.resume: '{checkpoint}' holds no optimizer and no scheduler"):
        checkpoint_to_resume(tmp_path, resume=True)


class _StopAfterFirstCheckpoint(TrainerCallback):
    def on_save(self, args, state, control, **kwargs):
        raise KeyboardInterrupt("a kill after epoch 1's checkpoint")


@pytest.mark.slow
def test_a_killed_save_only_model_run_is_not_resumed_silently(tmp_path):
    from workbench.train import finetune

    training = {"num_train_epochs": 2, "save_only_model": True}
    with pytest.raises(KeyboardInterrupt):
        finetune(tiny_config(tmp_path / "run", training=training), callbacks=[_StopAfterFirstCheckpoint()])
    assert not list((tmp_path / "run" / "checkpoint-4").glob("optimizer.*"))
    with pytest.raises(ValueError, match=r"^training\.save_only_model:"):
        finetune(tiny_config(tmp_path / "run", training={**training, "resume": True}))


# ----------------------------------------------------------------------------- 10. CSV files


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("\ufefftext,label\na,pos\nb,neg\n\ufefftext,label\nc,pos\n", "x.csv:4: repeats the header line"),
        ('text,label\n"a,pos\nb,neg\nc,pos\nd"x,neg\ne,pos\n', "x.csv:2: a quoted field runs on to line 5"),
        ('text,label\na,pos\n"unclosed,neg\nb,pos\n', "x.csv:3: a quoted field runs on to line 4"),
        ("text,text,label\na,b,pos\n", "x.csv:1: the header names the column 'text' twice"),
        ("text,label,label\na,b,pos\n", "x.csv:1: the header names the column 'label' twice"),
    ],
)
def test_csv_malformations_name_the_file_and_line(tmp_path, text, names):
    (tmp_path / "x.csv").write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{tmp_path / names}"):
        load_table(tmp_path / "x.csv")


@pytest.mark.parametrize(
    ("name", "raw", "names"),
    [
        (
            "x.jsonl",
            b'\xef\xbb\xbf{"text": "a", "label": "x"}\n\xef\xbb\xbf{"text": "b", "label": "y"}\n',
            "x.jsonl:2:",
        ),
        ("x.json", b'[{"text": "a", "label": "x"},\n{"text": "b", "label": "y"}]\n', "x.json:1: not a JSON object"),
        ("x.jsonl", b'{"text": "a", "label": "x"}{"text": "b", "label": "y"}\n', "x.jsonl:1: not a JSON object"),
        ("x.jsonl", b'{"text": "a", "label": NaN}\n', "x.jsonl:1: column 'label': empty or missing label"),
        ("x.csv", b"text,label\ra,x\rb,y\r", "x.csv:1:"),  # old Mac line ends
        ("x.csv", b"text;label\na;x\nb;y\n", "x.csv:2: missing column 'text'"),  # a European Excel CSV
        ("x.csv", b"text,label\na,x,\nb,y\n", "x.csv:2: expected 2 fields"),
    ],
)
def test_other_csv_and_json_malformations_name_the_file_and_line(tmp_path, name, raw, names):
    (tmp_path / name).write_bytes(raw)
    with pytest.raises(ValueError, match=f"^{re.escape(str(tmp_path / names))}"):
        load_table(tmp_path / name)


def test_a_byte_order_mark_opening_a_headerless_line_is_dropped(tmp_path):
    from workbench.data import load_chnsenticorp

    path = tmp_path / "c.tsv"
    path.write_bytes("好\t1\n".encode() + "\ufeff坏\t0\n".encode())  # two files joined with cat
    assert load_chnsenticorp(path)["text"] == ["好", "坏"]


def test_a_tsv_header_naming_a_column_twice_is_refused(tmp_path):
    from workbench.data import load_chnsenticorp

    (tmp_path / "c.tsv").write_text("label\tlabel\n好\t1\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{tmp_path / 'c.tsv'}:1: the header names the column 'label' twice"):
        load_chnsenticorp(tmp_path / "c.tsv")


# ----------------------------------------------------------------------------- 11. a full disk


def _enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_write_failures_are_recognised_however_the_library_reports_them():
    from safetensors import SafetensorError

    assert write_failure(OSError(errno.ENOSPC, "No space left on device")) == "No space left on device"
    assert write_failure(SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)"))
    assert "disk full" in write_failure(RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576"))
    assert write_failure(RuntimeError("size mismatch")) is None


def test_a_full_disk_leaves_metrics_json_whole_or_absent(tmp_path, monkeypatch):
    write_json(tmp_path / "metrics.json", {"metrics": {"f1": 0.5}})

    def half_then_full(self, text, *args, **kwargs):
        with open(self, "w", encoding="utf-8") as handle:
            handle.write(text[:5])
        _enospc()

    monkeypatch.setattr(Path, "write_text", half_then_full)
    with pytest.raises(
        ValueError, match=rf"^{tmp_path / 'metrics.json'}: cannot be written \(No space left on device\)"
    ):
        write_json(tmp_path / "metrics.json", {"metrics": {"f1": 0.9}})
    monkeypatch.undo()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["metrics.json"]  # no temporary file
    assert json.loads((tmp_path / "metrics.json").read_text())["metrics"]["f1"] == 0.5  # the old content


def test_a_full_disk_when_a_run_writes_its_config_keeps_the_previous_one(tmp_path, monkeypatch):
    config = load_config(tiny_config(tmp_path / "run"))
    claim_output_dir(config).close()
    before = (tmp_path / "run" / "run_config.yaml").read_text()
    pwrite = os.pwrite
    monkeypatch.setattr(
        os, "pwrite", lambda fd, data, at: _enospc() if b"resume: true" in data else pwrite(fd, data, at)
    )
    with pytest.raises(ValueError, match=r"^output_dir: cannot write into .*\(No space left on device\)"):
        claim_output_dir(load_config(tiny_config(tmp_path / "run", training={"resume": True})))
    monkeypatch.undo()
    assert (tmp_path / "run" / "run_config.yaml").read_text() == before


def _safetensors_disk_full(state, filename, *args, **kwargs):
    from safetensors import SafetensorError

    Path(filename).write_bytes(b"half a file")
    raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")


def _torch_disk_full(obj, f, *args, **kwargs):
    Path(f).write_bytes(b"half")
    raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534")


@pytest.mark.slow
@pytest.mark.parametrize("library", ["safetensors", "torch"])
def test_a_full_disk_during_a_checkpoint_is_one_line_and_a_retry_runs(tmp_path, monkeypatch, capsys, library):
    import transformers.modeling_utils

    if library == "safetensors":
        monkeypatch.setattr(transformers.modeling_utils, "safe_save_file", _safetensors_disk_full)
    else:
        monkeypatch.setattr(torch, "save", _torch_disk_full)
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"task": "finetune", **tiny_config(tmp_path / "run")}), encoding="utf-8")
    assert train_main([str(path)]) == 2
    error = capsys.readouterr().err
    assert (
        error.startswith(f"error: output_dir: cannot write into {str(tmp_path / 'run')!r}") and error.count("\n") == 1
    )
    assert sorted(item.name for item in (tmp_path / "run").iterdir()) == ["classes.json", "run_config.yaml"]
    monkeypatch.undo()
    assert train_main([str(path)]) == 0  # the retry is not refused
    capsys.readouterr()


@pytest.mark.slow
def test_a_full_disk_at_the_final_save_keeps_the_checkpoints_and_resume_finishes(tmp_path, monkeypatch):
    import transformers.modeling_utils

    from workbench.train import finetune

    original = transformers.modeling_utils.safe_save_file

    def full_for_the_final_model(state, filename, *args, **kwargs):
        if "/.final/" in str(filename):
            _safetensors_disk_full(state, filename)
        return original(state, filename, *args, **kwargs)

    monkeypatch.setattr(transformers.modeling_utils, "safe_save_file", full_for_the_final_model)
    with pytest.raises(ValueError, match=r"^output_dir: cannot write into .*No space left on device.*training\.resume"):
        finetune(tiny_config(tmp_path / "run"))
    run = tmp_path / "run"
    assert not (run / ".final").exists() and not (run / "model.safetensors").exists()
    assert [path.name for path in run.glob("checkpoint-*")] == ["checkpoint-4"]
    monkeypatch.undo()
    finetune(tiny_config(tmp_path / "run", training={"resume": True}))
    assert (run / "model.safetensors").is_file() and (run / "metrics.json").is_file()


def _full_for(suffix: str):
    """A ``Path.write_text`` that writes half of the text of a file whose name ends with ``suffix``, then fails."""
    original = Path.write_text

    def write_text(self, text, *args, **kwargs):
        if not self.name.endswith(suffix):
            return original(self, text, *args, **kwargs)
        original(self, text[: len(text) // 2], *args, **kwargs)
        _enospc()

    return write_text


def test_a_full_disk_at_the_runner_s_start_is_one_line_and_leaves_no_run_folder(tmp_path, monkeypatch, capsys):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    _notebook(notebooks / "nb.ipynb", "output_dir = None", "pass")
    (tmp_path / "params" / "default").mkdir(parents=True)
    monkeypatch.setattr(Path, "write_text", _full_for(".partial"))
    options = ["--notebooks-dir", str(notebooks), "--params-dir", str(tmp_path / "params")]
    assert workbench_main(["run", *options, "--outputs-dir", str(tmp_path / "out"), "--run-id", "r"]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: --outputs-dir {str(tmp_path / 'out')!r}: ") and error.count("\n") == 1
    assert "No space left on device" in error and "plotly.min.js" in error
    assert list((tmp_path / "out").iterdir()) == []  # no run folder, no .partial: `--run-id r` is free again


# ----------------------------------------------------------------------------- 12. TrainingArguments not honoured


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("label_names", ["labels"]),
        ("prediction_loss_only", True),
        ("batch_eval_metrics", True),
        ("eval_delay", 1),
        ("eval_do_concat_batches", False),
        ("debug", "underflow_overflow"),
        ("parallelism_config", {"dp_replicate_size": 1}),
        ("optim_args", "a=b=c"),
        ("optim_args", "lr"),
        ("lr_scheduler_type", "reduce_lr_on_plateau"),
        ("lr_scheduler_kwargs", {"bogus": 1}),
        ("optim", "adamw_bnb_8bit"),  # bitsandbytes is not installed
        ("optim", "galore_adamw"),  # nor galore_torch
        ("optim", "schedule_free_adamw"),  # nor schedulefree
        ("use_liger_kernel", True),  # nor liger-kernel
        ("deepspeed", "/no/such/ds_config.json"),  # nor deepspeed
        ("fsdp", "full_shard"),  # outside distributed training
    ],
)
def test_training_arguments_the_workbench_cannot_honour_are_refused_at_load(key, value):
    with pytest.raises(ValueError, match=rf"^training\.{key}:"):
        load_config({"training": {key: value}})


@pytest.mark.parametrize(
    ("key", "value"),
    [("label_names", None), ("prediction_loss_only", False), ("eval_delay", 0), ("optim_args", "beta1=0.9,beta2=0.99")],
)
def test_their_default_values_are_accepted(key, value):
    load_config({"training": {key: value}})


# ----------------------------------------------------------------------------- 13. data edge cases


def test_a_training_file_of_one_class_names_the_file_and_the_class(tmp_path):
    path = write_csv(tmp_path / "one.csv", [f"text {i},pos" for i in range(30)])
    with pytest.raises(ValueError, match=rf"^data\.path: '{path}' holds one class, 'pos'"):
        load_splits(table(path))


def test_a_training_file_whose_texts_are_all_empty_is_refused(tmp_path):
    path = write_csv(tmp_path / "empty.csv", [f'"",{"pos" if i % 2 else "neg"}' for i in range(30)])
    with pytest.raises(ValueError, match=rf"^data\.path: every text of '{path}' is empty"):
        load_splits(table(path))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("lines", "names"),
    [
        (["今天天气很好。"], "packs into 1 block of data.max_length=32 tokens; data.eval_fraction"),
        # 20 distinct texts (load_texts keeps each once)
        ([f"😀😀😀 ☃☃☃ ♞♞{'♞' * i}" for i in range(20)], "100% of its tokens are \\[UNK\\]"),
    ],
)
def test_a_corpus_too_short_or_unreadable_names_data_path(tmp_path, lines, names):
    from workbench.train.pretraining import prepare_pretraining

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    data = {"source": "corpus", "path": str(corpus), "max_length": 32, "num_proc": 1}
    config = load_config({"task": "pretrain_mlm", "data": data, "training": {"dataloader_num_workers": 0}})
    with pytest.raises(ValueError, match=rf"^data\.path '{corpus}': {names}"):
        prepare_pretraining(config)


def test_a_huge_text_is_cut_before_tokenizing_and_encodes_as_before():
    from workbench.train import tokenize_splits

    tokenizer = load_tokenizer()
    text = "".join(chr(0x4E00 + i % 2000) for i in range(50_000))
    splits = {"train": Dataset.from_dict({"text": [text, "短"], "label": [0, 1]})}
    from datasets import DatasetDict

    encoded = tokenize_splits(DatasetDict(splits), tokenizer, max_length=64)
    assert encoded["train"]["input_ids"][0] == tokenizer(text, truncation=True, max_length=64)["input_ids"]
    assert clip_texts(["x" * 20_000_000, None], 64) == ["x" * 6400, None]
    start = time.monotonic()
    tokenize_splits(
        DatasetDict({"train": Dataset.from_dict({"text": ["字" * 20_000_000], "label": [0]})}), tokenizer, 64
    )
    assert time.monotonic() - start < 30  # a 20M-character text is tokenized as its first 6,400 characters
