"""Issue 37, the fourth hostile sweep: secrets under any name and of any type, remote resources in offline pages,
one-class splits and validation, ratings read as indices, CORN in the trainers, library calls that misread input,
seeds beyond numpy's range and exports of files that are not notebooks (docs/reliability.md, round 4). Each bad
input: the exception type or exit code, what its message names, and what is (not) written."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import nbformat
import numpy as np
import pandas as pd
import pytest
import yaml
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from workbench import evidence
from workbench.__main__ import main as workbench_main
from workbench.checks import MAX_SEED, check_seeds, check_text
from workbench.config import TrainingConfig, load_config
from workbench.data import label_names, load_splits, load_table
from workbench.decisions import DecisionRule, tune_offsets, tune_rule, tune_threshold
from workbench.metrics import compute_score
from workbench.metrics_file import write_json, write_metrics
from workbench.redaction import is_secret, redact, scrub, secret_texts, shown
from workbench.runs.notebook_cells import notebook_parameters
from workbench.runs.options import parse_seeds, parse_sweep
from workbench.runs.plan import plan_executions
from workbench.runs.results import RESULTS_FILE, RUN_FILE, results_html, write_results
from workbench.train.__main__ import main as train_main
from workbench.yaml_files import parse_override

ROOT = Path(__file__).resolve().parents[1]
SECRET = "hf_ROUND4LEAKEDTOKEN"
TINY = {"num_layers": 1, "hidden_size": 32, "num_heads": 2}


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


def _csv(path: Path, rows: list[tuple[str, str]]) -> Path:
    path.write_text("text,label\n" + "".join(f"{text},{label}\n" for text, label in rows), encoding="utf-8")
    return path


# ----------------------------------------------------------------------------- 1. secrets by any name, any type

SECRET_KEYS = [
    # the names
    *("hubToken", "HFToken", "hub-token", "access_tokens", "api-key", "x-api-key", "private-key", "passphrase"),
    *("pwd", "authorization", "bearer", "github_pat", "openai_key"),
    # round 3's and their neighbours
    *("hub_token", "token", "AWS_SECRET_ACCESS_KEY", "apikey", "client_secret", "db_password", "hftoken"),
    *("use_auth_token", "X-Auth-Token", "refresh_token", "credentials", "ssh_key", "Authorization"),
    # a signed URL's query (S3, Azure SAS)
    *("X-Amz-Signature", "X-Amz-Security-Token", "sig", "Signature"),
]
NOT_SECRET_KEYS = [
    *("tokenizer", "max_tokens", "num_tokens", "n_tokens", "key_column", "tokens", "keys", "pad_token"),
    *("mask_token_id", "additional_special_tokens", "eval_masked_tokens", "hub_model_id", "hub_private_repo"),
    *("text_key", "sweep_keys", "include_tokens_per_second", "keyword", "authors", "monkey", "learning_rate"),
]


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_a_secret_looking_key_is_secret(key):
    assert is_secret(key)


@pytest.mark.parametrize("key", NOT_SECRET_KEYS)
def test_a_key_naming_a_text_s_token_or_a_data_key_is_not(key):
    assert not is_secret(key)


def _section_keys(cls, prefix: str = "") -> list[str]:
    """Every key of a config section and its nested sections."""
    from workbench.config import Section
    from workbench.config.sections import _section_fields

    keys = []
    for name, hint in _section_fields(cls).items():
        keys.append(f"{prefix}{name}")
        if isinstance(hint, type) and issubclass(hint, Section):
            keys += _section_keys(hint, f"{prefix}{name}.")
    return keys


def test_no_key_of_the_workbench_is_secret_but_hub_token():
    # a false positive would refuse a notebook's parameter (the runner cannot hand a secret over unwritten)
    from dataclasses import fields

    from transformers import TrainingArguments

    from workbench.config import Config

    keys = [key.rsplit(".", 1)[-1] for key in _section_keys(Config)]
    keys += [item.name for item in fields(TrainingArguments)]
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        keys += notebook_parameters(notebook)
    assert sorted({key for key in keys if is_secret(key)}) == ["hub_token"]


def test_redact_replaces_the_whole_value_whatever_its_type():
    tree = {
        "training": {"hub_token": [SECRET], "hubToken": {"value": SECRET}, "learning_rate": 0.1},
        "api-key": 123456789,  # a number under a key's name: hidden
        "password": 1234,
        "nested": [{"x-api-key": SECRET, "max_tokens": 3}],
        "has_token": 1.0,  # a number under a token's name: a measure (a token is a text)
        "hub_token_unset": None,
        "github_pat": "",
        "hub_token": "<HUB_TOKEN>",  # its mark already
    }
    assert redact(tree) == {
        "training": {"hub_token": "<HUB_TOKEN>", "hubToken": "<HUBTOKEN>", "learning_rate": 0.1},
        "api-key": "<API-KEY>",
        "password": "<PASSWORD>",
        "nested": [{"x-api-key": "<X-API-KEY>", "max_tokens": 3}],
        "has_token": 1.0,
        "hub_token_unset": None,
        "github_pat": "",
        "hub_token": "<HUB_TOKEN>",
    }
    assert secret_texts(tree) == [SECRET, "123456789", "1234"]
    assert scrub(f"error: bad {SECRET}", secret_texts(tree)) == "error: bad <SECRET>"


@pytest.mark.parametrize(
    ("call", "names"),
    [
        (lambda: load_config(tiny_config("out", training={"hubToken": SECRET})), "training.hubToken"),
        (lambda: load_config(tiny_config("out", training={"hub-token": [SECRET]})), "training.hub-token"),
        (lambda: load_config(tiny_config("out", training={"hub_token": [SECRET]})), "training.hub_token"),
        (lambda: load_config(tiny_config("out", training={"hub_token": {"a": SECRET}})), "training.hub_token"),
        (lambda: load_config(tiny_config("out"), [f"training.hubToken={SECRET}"]), "training.hubToken"),
        (lambda: load_config(tiny_config("out"), [f"training.hub_token=[{SECRET}"]), "training.hub_token"),
        (lambda: load_config(tiny_config("out"), [f"training.hub_token=*{SECRET}"]), "training.hub_token"),
        (lambda: load_config({**tiny_config("out"), "training": [{"hub_token": SECRET}]}), "training"),
        (lambda: parse_override(f"training.api_key=[{SECRET}"), "training.api_key"),
        (lambda: check_text("api_key", [SECRET]), "api_key"),
        (lambda: parse_sweep([f"hub_token={SECRET},{SECRET}"]), "hub_token"),
        (lambda: parse_sweep([f"apiKey={SECRET}\x07"]), "apiKey"),
    ],
)
def test_a_message_shows_a_secret_as_its_mark(call, names):
    with pytest.raises(ValueError, match=re.escape(names)) as raised:
        call()
    assert SECRET not in str(raised.value)


def test_shown_names_the_mark_of_a_dotted_key():
    assert shown("training.hubToken", SECRET) == "<HUBTOKEN>" and shown("training.seed", 3) == 3
    assert shown("loss.params", {"api_key": SECRET}) == {"api_key": "<API_KEY>"}


def test_a_config_and_a_scale_sentence_show_no_secret():
    config = TrainingConfig.from_mapping({"hub_token": SECRET})
    assert SECRET not in repr(config)
    assert SECRET not in evidence.scale(training={"hub_token": SECRET, "run_name": "r"}, model={"tiny": TINY})


@pytest.mark.parametrize(
    ("config", "override", "names"),
    [
        ({"hubToken": SECRET}, None, "training.hubToken"),
        ({"hub_token": [SECRET]}, None, "training.hub_token"),
        ({}, f"training.x-api-key={SECRET}", "training.x-api-key"),
        ({}, f"training.hub_token=[{SECRET}", "training.hub_token"),
    ],
)
def test_the_train_command_prints_no_secret_and_writes_nothing(tmp_path, capsys, config, override, names):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(tiny_config(tmp_path / "run", training=config)), encoding="utf-8")
    assert train_main([str(path), *([override] if override else [])]) == 2
    captured = capsys.readouterr()
    assert names in captured.err and len(captured.err.strip().splitlines()) == 1
    assert SECRET not in captured.err + captured.out
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("params_text", "names"),
    [
        (f"training: {{hubToken: {SECRET}}}", "'training.hubToken' holds a secret"),
        (f"training: {{hub_token: [{SECRET}]}}", "'training.hub_token' holds a secret"),
        (f"training: {{hub_token: {{value: {SECRET}}}}}", "'training.hub_token' holds a secret"),
        (f"other: {{api-key: [{SECRET}]}}", "'other.api-key' holds a secret"),
        (f"other: {{credentials: {{user: u, pass: {SECRET}}}}}", "'other.credentials' holds a secret"),
        ("other: {password: 12345678}", "'other.password' holds a secret"),
    ],
)
def test_the_runner_refuses_a_secret_by_any_name_and_type_and_writes_nothing(tmp_path, capsys, params_text, names):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    _notebook(notebooks / "nb.ipynb", "training = {}\nother = {}\noutput_dir = None", "pass")
    params = _params(tmp_path, "nb", params_text)
    options = ["--notebooks-dir", str(notebooks), "--params-dir", str(params), "--outputs-dir", str(tmp_path / "out")]
    assert workbench_main(["run", *options]) == 2
    captured = capsys.readouterr()
    assert names in captured.err and SECRET not in captured.err + captured.out and "12345678" not in captured.err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


@pytest.mark.slow
def test_a_run_writes_the_token_into_no_file_even_when_the_notebook_prints_it(tmp_path, capsys):
    # the kernel holds the token (HF_TOKEN); a notebook that prints it, records it and fails quoting it
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    body = (
        "import os\nfrom workbench import evidence\nfrom workbench.runs import write_metrics\n"
        "token = os.environ['HF_TOKEN']\nprint(token)\n"
        "scale = evidence.scale(training={**training, 'hub_token': token})\n"
        "record = evidence.record('A paper', scale, [0], [], None, comment=f'run with {token}')\n"
        "write_metrics(output_dir, {'f1': 0.5}, parameters={'training': training, 'hubToken': token},\n"
        "              note=f'the token is {token}', evidence=record)\n"
        "raise ValueError(f'the hub refused {token}')"
    )
    _notebook(notebooks / "nb.ipynb", "training = {}\noutput_dir = None", body)
    params = _params(tmp_path, "nb", f"training: {{hub_token: {SECRET}, run_name: r}}")
    options = ["--notebooks-dir", str(notebooks), "--params-dir", str(params), "--outputs-dir", str(tmp_path / "out")]
    assert workbench_main(["run", *options, "--run-id", "r"]) == 1
    captured = capsys.readouterr()
    folder = tmp_path / "out" / "r"
    assert files_holding(folder, SECRET) == []  # params.yaml, the notebook, its page, metrics.json, summary, index
    assert SECRET not in captured.out + captured.err
    summary = pd.read_csv(folder / "summary.csv")
    assert summary["error"][0] == "ValueError: the hub refused <SECRET>"
    assert "&lt;SECRET&gt;" in (folder / "index.html").read_text(encoding="utf-8")
    assert json.loads((folder / "run.json").read_text(encoding="utf-8"))["run_id"] == "r"
    assert "run with <SECRET>" in (folder / RESULTS_FILE).read_text(encoding="utf-8")


# ----------------------------------------------------------------------------- 3. no remote resource offline

REMOTE = [
    "![x](http://example.com/a.png)",
    '<img src="https://example.com/b.png" srcset="https://example.com/c.png 2x">',
    '<iframe src="http://example.com/frame"></iframe>',
    '<div style="background: url(http://example.com/d.png)">styled</div>',
    '<link rel="stylesheet" href="http://example.com/e.css">',
    '<video src="http://example.com/f.mp4" poster="http://example.com/g.png"></video>',
    '<svg><image href="http://example.com/h.png"/></svg>',
]


def _run_with_evidence(tmp_path: Path, run_name: str) -> Path:
    """A run folder with run.json and a notebook's evidence whose scale names ``training.run_name``."""
    run_dir = tmp_path / "run"
    scale = evidence.scale(training={"run_name": run_name})
    record = evidence.record("A paper", scale, [0, 1], [], None, comment=run_name)
    write_metrics(run_dir / "01_toy", {"x": 1.0}, evidence=record)
    header = {"run_id": "run", "command": "python -m workbench run", "params_set": "default", "folders": ["01_toy"]}
    write_json(run_dir / RUN_FILE, header)
    return run_dir


def remote_requests(page: str) -> list[str]:
    """What ``page`` would load from the network: an element's URL attribute (a link a reader follows aside) or a
    style's url(), read by an HTML parser (text that merely shows such markup, escaped, loads nothing)."""
    from html.parser import HTMLParser

    found = []

    class Collector(HTMLParser):
        def handle_starttag(self, tag, attrs):
            for name, value in attrs:
                value = (value or "").strip().lower()
                remote = value.startswith(("http:", "https:", "//")) or "url(" in value
                if remote and not (tag == "a" and name == "href") or name == "srcset" or tag in ("iframe", "link"):
                    found.append(f"<{tag} {name}={value!r}>")

    Collector().feed(page)
    return found


@pytest.mark.parametrize("text", REMOTE)
def test_the_results_section_of_index_html_loads_nothing_from_the_network(tmp_path, text):
    run_dir = _run_with_evidence(tmp_path, text)
    assert write_results(run_dir) == run_dir / RESULTS_FILE
    assert text in (run_dir / RESULTS_FILE).read_text(encoding="utf-8")  # the page prints the run's parameters
    assert remote_requests(results_html(run_dir)) == []


def test_the_sanitiser_is_what_keeps_them_out(tmp_path):
    # the parser above does see a remote image mistune renders, and the sanitiser drops it
    import mistune

    assert remote_requests(mistune.create_markdown()(REMOTE[0])) == ["<img src='http://example.com/a.png'>"]


def test_the_index_draws_no_figure_image_from_the_network(tmp_path):
    from workbench.runs.execute import Outcome
    from workbench.runs.plan import Execution
    from workbench.runs.report import write_report

    folder = tmp_path / "nb"
    (folder / "figures").mkdir(parents=True)
    remote = {"source": "http://example.com/i.png", "x": 0, "y": 0, "sizex": 1, "sizey": 1}
    embedded = {**remote, "source": "data:image/png;base64,iVBORw0KGgo="}
    figure = {"data": [{"type": "bar", "y": [1, 2]}], "layout": {"images": [remote, embedded], "title": "t"}}
    (folder / "figures" / "f.json").write_text(json.dumps(figure), encoding="utf-8")
    (folder / "figures" / "f.html").write_text("<p>figure</p>", encoding="utf-8")
    outcome = Outcome(Execution(tmp_path / "nb.ipynb", {}, {}, ""), folder, "ok", 1.0, metrics={})
    index = write_report(tmp_path, [outcome]).read_text(encoding="utf-8")
    assert "http://example.com/i.png" not in index and "data:image/png;base64,iVBORw0KGgo=" in index


# ----------------------------------------------------------------------------- 8. one class


def test_tuning_on_one_class_is_refused_naming_labels_and_tune_rule_keeps_the_argmax():
    p = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.6, 0.4]])
    with pytest.raises(ValueError, match=r"^labels: tuning a threshold .* only class 1 \(4 examples\)"):
        tune_threshold(p, np.array([1, 1, 1, 1]))
    three = np.array([[0.5, 0.3, 0.2], [0.2, 0.5, 0.3], [0.1, 0.2, 0.7]])
    with pytest.raises(ValueError, match=r"^labels: tuning offsets .* only class 2"):
        tune_offsets(three, np.array([2, 2, 2]))
    for probabilities, labels in ((p, [1, 1, 1, 1]), (three, [0, 0, 0])):
        with pytest.warns(UserWarning, match="one class"):
            rule = tune_rule(probabilities, np.array(labels), "macro_f1")
        assert rule == DecisionRule("argmax")
        np.testing.assert_array_equal(rule.predict(probabilities), probabilities.argmax(1))
    assert tune_threshold(p, np.array([0, 0, 1, 1])) != 0.5  # two classes: tuned as before (0.55)


def test_a_split_of_one_class_is_named_with_its_class(tmp_path):
    train = _csv(tmp_path / "train.csv", [("甲", "pos"), ("乙", "neg"), ("丙", "pos")])
    validation = _csv(tmp_path / "dev.csv", [("丁", "pos"), ("戊", "pos")])
    test = _csv(tmp_path / "test.csv", [("己", "neg"), ("庚", "pos")])
    data = {"source": "table", "path": str(train), "validation_path": str(validation), "test_path": str(test)}
    data.update(text="text", label="label", seed=12345)  # a seed of its own: the warning is given once per process
    with pytest.warns(UserWarning, match=r"the validation split holds one class, 'pos', in all its 2 examples"):
        splits = load_splits(data)
    assert label_names(splits["validation"]) == ["neg", "pos"] and splits["validation"]["label"] == [1, 1]
    swapped = {**data, "validation_path": str(test), "test_path": str(validation), "seed": 54321}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_splits(swapped)
    named = [str(warning.message) for warning in caught if "one class" in str(warning.message)]
    assert len(named) == 1 and "the test split holds one class, 'pos'" in named[0]


# ----------------------------------------------------------------------------- 9. ratings read as indices


def test_numbers_that_are_no_names_need_label_values(tmp_path):
    path = _csv(tmp_path / "ratings.csv", [("差", "1"), ("好", "2"), ("中", "2")])
    names = ["bad", "ok", "good"]
    with pytest.raises(ValueError, match=re.escape(f"{path}:2: label '1' is a number") + ".*label_values"):
        load_table(path, label_names=names)
    assert load_table(path, label_names=names, label_values=[1, 2, 3])["label"] == [0, 1, 1]  # ratings from 1
    assert load_table(path, label_names=names, label_values=[0, 1, 2])["label"] == [1, 2, 2]  # indices
    assert load_table(_csv(tmp_path / "named.csv", [("差", "bad"), ("好", "good")]), label_names=names)["label"] == [
        0,
        2,
    ]
    with pytest.raises(ValueError, match="^label_values: must be 3 distinct values"):
        load_table(path, label_names=names, label_values=[1, 2])
    with pytest.raises(ValueError, match="^label_values: must come with label_names"):
        load_table(path, label_values=[1, 2, 3])
    with pytest.raises(ValueError, match="^label_values: '2' is the value of class 'b' and the name of class '2'"):
        load_table(path, label_names=["a", "b", "2"], label_values=[1, 2, 3])


def test_the_data_section_takes_label_values_for_every_split(tmp_path):
    train = _csv(tmp_path / "train.csv", [("差", "1"), ("好", "3"), ("中", "2")])
    validation = _csv(tmp_path / "dev.csv", [("优", "3"), ("可", "2")])
    data = {"source": "table", "path": str(train), "validation_path": str(validation), "text": "text"}
    data.update(label="label", label_names=["bad", "ok", "good"])
    with pytest.raises(ValueError, match=re.escape(f"{train}:2: label '1'")):
        load_splits(data)
    splits = load_splits({**data, "label_values": [1, 2, 3]})
    assert splits["train"]["label"] == [0, 2, 1] and splits["validation"]["label"] == [2, 1]
    with pytest.raises(
        ValueError, match="^data.label_values: must be one distinct label per entry of data.label_names"
    ):
        load_config({"data": {**data, "label_values": [1, 1, 2]}})
    with pytest.raises(ValueError, match="^data.label_values"):
        load_config({"data": {"source": "table", "label_values": [1, 2]}})


# ----------------------------------------------------------------------------- 10. CORN in the trainers


@pytest.mark.slow
def test_the_train_command_builds_k_minus_1_outputs_for_corn_and_predicts_by_its_rank_rule(tmp_path, capsys):
    from transformers import AutoConfig

    path = tmp_path / "corn.yaml"
    path.write_text(yaml.safe_dump(tiny_config(tmp_path / "run", loss={"name": "corn"})), encoding="utf-8")
    assert train_main([str(path)]) == 0
    assert AutoConfig.from_pretrained(tmp_path / "run").num_labels == 2  # K - 1 for the three relevance classes
    table = pd.read_csv(tmp_path / "run" / "predictions.csv")
    above = 1 - np.cumsum(table[["p_irrelevant", "p_related", "p_highly_relevant"]].to_numpy(), axis=1)[:, :2]
    np.testing.assert_array_equal(table["pred"], (above > 0.5).sum(1))  # the rank rule: count of P(y > k) > 0.5
    recorded = json.loads((tmp_path / "run" / "metrics.json").read_text(encoding="utf-8"))
    assert recorded["accuracy"] == pytest.approx(float((table["pred"] == table["gold"]).mean()))


def test_corn_on_nominal_labels_is_refused_as_pcl_is(tmp_path, capsys):
    config = tiny_config(tmp_path / "run", data={"source": "sample_sentences"}, loss={"name": "corn"})
    with pytest.raises(ValueError, match=r"^loss.name: corn ranks ordered classes .* data.ordinal: false"):
        load_config(config)
    path = tmp_path / "corn.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    assert train_main([str(path)]) == 2 and "loss.name: corn" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()
    for task in ("two_stage", "finetune"):  # every task that trains a classifier with loss
        with pytest.raises(ValueError, match="^loss.name: corn"):
            load_config({**config, "task": task})
    load_config({**config, "data": {**config["data"], "ordinal": True}})  # ordered classes: allowed


# ----------------------------------------------------------------------------- 14. library calls


@pytest.mark.parametrize(
    ("call", "names"),
    [
        (lambda: compute_score([0, 5], [0, 5], "accuracy", 2), "y_true: class ids must be in [0, 1]"),
        (lambda: compute_score([0, 1], [0, -1], "macro_f1", 2), "y_pred: class ids must be in [0, 1]"),
        (lambda: compute_score([0, 1], [0, 1], "f1", 2), "name: must be one of"),
        (lambda: compute_score([0.0, 1.0], [0, 1], "accuracy", 2), "y_true: must hold integer class ids"),
        (lambda: compute_score([], [], "accuracy", 2), "y_true: must hold at least one label"),
        (lambda: DecisionRule("threshold", (0.5,)).predict(np.full((2, 3), 1 / 3)), "probabilities: a threshold"),
        (lambda: DecisionRule("offsets", (0.0, 1.0)).predict(np.full((2, 3), 1 / 3)), "probabilities: this offsets"),
        (lambda: DecisionRule("threshold", ()), "values: a threshold rule holds one threshold"),
        (lambda: DecisionRule("threshold", (1.5,)), "values: a threshold rule holds one threshold in [0, 1]"),
        (lambda: DecisionRule("threshold", (float("nan"),)), "values: must be a finite number"),
        (lambda: DecisionRule("argmax", (1.0,)), "values: an argmax rule holds no values"),
        (lambda: DecisionRule("logit_adjustment", (-1.0,), (1.0, 2.0)), "values: a logit_adjustment rule"),
    ],
)
def test_library_calls_that_would_misread_input_name_the_argument(call, names):
    with pytest.raises(ValueError, match="^" + re.escape(names)):
        call()


def test_compute_score_still_scores_ids_in_range():
    assert compute_score([0, 1, 1], [0, 1, 0], "accuracy", 2) == pytest.approx(2 / 3)
    assert compute_score([0, 1], [0, 1], "accuracy", 3) == 1.0  # a class with no example is fine


# ----------------------------------------------------------------------------- 18. seeds


def test_one_seed_bound_everywhere_numpy_s():
    assert MAX_SEED == 2**32 - 1
    np.random.seed(MAX_SEED)  # the bound is numpy's own
    with pytest.raises(ValueError):
        np.random.seed(MAX_SEED + 1)
    too_big = MAX_SEED + 1
    assert parse_seeds(str(MAX_SEED)) == [MAX_SEED]
    with pytest.raises(ValueError, match="--seeds"):
        parse_seeds(str(too_big))
    with pytest.raises(ValueError, match=rf"^seeds entry: must be an int in \[0, {MAX_SEED}\], got {too_big}"):
        check_seeds("seeds", [too_big])
    for section, key in (("training", "seed"), ("training", "data_seed"), ("data", "seed")):
        assert getattr(getattr(load_config({section: {key: MAX_SEED}}), section), key) == MAX_SEED
        with pytest.raises(ValueError, match=rf"^{section}.{key}: must be (null or )?an int in \[0, {MAX_SEED}\]"):
            load_config({section: {key: too_big}})


def test_seeds_past_the_bound_are_refused_before_any_notebook_starts(tmp_path, capsys):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    _notebook(notebooks / "nb.ipynb", "seeds = [0]\noutput_dir = None", "raise SystemExit('ran')")
    too_big = MAX_SEED + 1
    params = _params(tmp_path, "nb", f"seeds: [{too_big}]")
    options = ["--notebooks-dir", str(notebooks), "--params-dir", str(params), "--outputs-dir", str(tmp_path / "out")]
    assert workbench_main(["run", *options]) == 2
    assert f"seeds entry: must be an int in [0, {MAX_SEED}], got {too_big}" in capsys.readouterr().err
    assert workbench_main(["run", *options, "--seeds", str(too_big)]) == 2
    assert "--seeds" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    with pytest.raises(ValueError, match="--sweep: seeds entry"):
        plan_executions([notebooks / "nb.ipynb"], _params(tmp_path, "nb", ""), "default", {"seeds": [[0], [too_big]]})


@pytest.mark.slow
def test_a_training_seed_at_the_bound_trains(tmp_path):
    from workbench.train import finetune

    result = finetune(tiny_config(tmp_path / "run", training={"seed": MAX_SEED, "data_seed": MAX_SEED}))
    assert result.metrics["parameters"]["training"]["seed"] == MAX_SEED


# ----------------------------------------------------------------------------- 19. export of a file that is no notebook

NOT_NOTEBOOKS = {
    "text.ipynb": "hello\n",
    "empty.ipynb": "",
    "list.ipynb": "[1, 2]",
    "no_cells.ipynb": '{"a": 1}',
    "bad_source.ipynb": json.dumps(
        {
            "cells": [{"cell_type": "code", "source": 5, "metadata": {}, "outputs": [], "execution_count": None}],
            "nbformat": 4,
            "nbformat_minor": 5,
            "metadata": {},
        }
    ),
    "bad_kernelspec.ipynb": json.dumps(
        {"cells": [], "nbformat": 4, "nbformat_minor": 5, "metadata": {"kernelspec": 5}}
    ),
    "weird_cell.ipynb": json.dumps(
        {"cells": [{"cell_type": "weird", "source": "x", "metadata": {}}], "nbformat": 4, "nbformat_minor": 5}
    ),
}


@pytest.mark.parametrize("name", sorted(NOT_NOTEBOOKS))
def test_export_of_a_file_that_is_not_a_notebook_is_one_line_and_writes_nothing(tmp_path, capsys, name):
    path = tmp_path / name
    path.write_text(NOT_NOTEBOOKS[name], encoding="utf-8")
    assert workbench_main(["export", str(path)]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: NOTEBOOK {path}: not a Jupyter notebook (") and len(error.splitlines()) == 1
    assert sorted(item.name for item in tmp_path.iterdir()) == [name]


def test_export_of_a_binary_file_or_a_folder_is_one_line(tmp_path, capsys):
    (tmp_path / "binary.ipynb").write_bytes(b"\xff\xfe\x00binary")
    (tmp_path / "folder.ipynb").mkdir()
    for name, names in (("binary.ipynb", "not a Jupyter notebook"), ("folder.ipynb", "no such file")):
        assert workbench_main(["export", str(tmp_path / name)]) == 2
        error = capsys.readouterr().err
        assert names in error and len(error.splitlines()) == 1


@pytest.mark.parametrize("name", ["text.ipynb", "bad_source.ipynb", "bad_kernelspec.ipynb"])
def test_a_run_of_a_file_that_is_not_a_notebook_is_one_line(tmp_path, capsys, name):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    (notebooks / "01_x.ipynb").write_text(NOT_NOTEBOOKS[name], encoding="utf-8")
    (tmp_path / "params" / "default").mkdir(parents=True)
    options = ["--notebooks-dir", str(notebooks), "--params-dir", str(tmp_path / "params")]
    assert workbench_main(["run", *options, "--outputs-dir", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert "01_x.ipynb: not a Jupyter notebook (" in error and len(error.splitlines()) == 1
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_notebook_with_a_markdown_cell_still_exports(tmp_path, capsys):
    notebook = new_notebook(cells=[new_markdown_cell("# Title"), new_code_cell("1")])
    nbformat.write(notebook, tmp_path / "ok.ipynb")
    assert workbench_main(["export", str(tmp_path / "ok.ipynb")]) == 0
    assert (tmp_path / "ok.html").is_file()
