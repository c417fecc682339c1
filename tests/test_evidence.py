"""Claim rows, verdicts and the results page (workbench.evidence, workbench.runs.results): values against hand
computations, and a page's numbers against its run's metrics.json."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, f1_score

from workbench import evidence
from workbench.__main__ import main
from workbench.evidence import DOES_NOT_HOLD, HOLDS, INCONCLUSIVE, Claim, compare, rate, verdict
from workbench.metrics_file import write_json, write_metrics
from workbench.runs.results import RESULTS_FILE, RUN_FILE, results_html, results_markdown, write_results

CLAIM = Claim("arXiv 0000.00000", "Table 1", "Our loss is better.")


def _predictions(seed: int = 0, n: int = 400, seeds: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, 3, n)
    a = np.where(rng.random((seeds, n)) < 0.8, gold, rng.integers(0, 3, (seeds, n)))
    b = np.where(rng.random((seeds, n)) < 0.5, gold, rng.integers(0, 3, (seeds, n)))
    return gold, a, b


@pytest.mark.parametrize(
    ("low", "high", "expected", "metric", "outcome"),
    [
        (0.01, 0.05, "better", "macro_f1", HOLDS),
        (-0.05, -0.01, "better", "macro_f1", DOES_NOT_HOLD),
        (-0.01, 0.05, "better", "macro_f1", INCONCLUSIVE),
        (0.0, 0.0, "better", "macro_f1", DOES_NOT_HOLD),
        (0.0, 0.0, "worse", "accuracy", DOES_NOT_HOLD),
        (-0.05, -0.01, "worse", "accuracy", HOLDS),
        (0.01, 0.05, "worse", "accuracy", DOES_NOT_HOLD),
        (-0.05, -0.01, "better", "macro_mae", HOLDS),  # a lower error is better
        (0.01, 0.05, "better", "macro_mae", DOES_NOT_HOLD),
        (0.0, 0.02, "better", "macro_f1", INCONCLUSIVE),  # a CI touching 0 does not exclude it
    ],
)
def test_verdict_rule(low, high, expected, metric, outcome):
    assert verdict(low, high, expected, metric) == outcome


def test_compare_by_hand():
    gold, a, b = _predictions()
    row = compare(
        CLAIM,
        setting="toy",
        method="a",
        baseline="b",
        metric="macro_f1",
        y_true=gold,
        method_predictions={seed: a[seed] for seed in range(3)},
        baseline_predictions={seed: b[seed] for seed in range(3)},
        test="test, generated",
        num_labels=3,
        n_resamples=300,
    )
    scores_a = [f1_score(gold, a[s], average="macro") for s in range(3)]
    scores_b = [f1_score(gold, b[s], average="macro") for s in range(3)]
    assert row["method_score"]["mean"] == pytest.approx(np.mean(scores_a))
    assert row["method_score"]["std"] == pytest.approx(np.std(scores_a, ddof=1))
    assert row["baseline_score"]["n"] == 3
    assert row["difference"] == pytest.approx(np.mean(scores_a) - np.mean(scores_b))
    assert row["ci_low"] > 0 and row["verdict"] == HOLDS
    assert (row["n_test"], row["n_seeds"], row["quote"], row["where"]) == (400, 3, CLAIM.quote, "Table 1")


def test_identical_predictions_do_not_hold_a_claimed_gain():
    gold, a, _ = _predictions()
    row = compare(
        CLAIM,
        setting="toy",
        method="PCL as released",
        baseline="LS",
        metric="accuracy",
        y_true=gold,
        method_predictions=a,
        baseline_predictions=a.copy(),
        test="t",
        num_labels=3,
        n_resamples=200,
    )
    assert (row["difference"], row["ci_low"], row["ci_high"], row["verdict"]) == (0.0, 0.0, 0.0, DOES_NOT_HOLD)
    assert row["method_score"]["mean"] == pytest.approx(np.mean([accuracy_score(gold, p) for p in a]))


def test_compare_pairs_seeds_by_name():
    gold, a, b = _predictions()
    with pytest.raises(ValueError, match="^baseline_predictions: must hold the method's seeds"):
        compare(
            CLAIM,
            setting="toy",
            method="a",
            baseline="b",
            metric="accuracy",
            y_true=gold,
            method_predictions={0: a[0], 1: a[1]},
            baseline_predictions={0: b[0], 2: b[2]},
            test="t",
            num_labels=3,
        )


def test_rate_against_a_printed_range_by_hand():
    # 0 of 10: the exact upper bound solves (1 - p)^10 = 0.025
    row = rate(
        CLAIM, setting="s", method="m", measure="prediction", successes=0, trials=10, paper_range=(0.01, 0.02), test="t"
    )
    assert row["ci_low"] == 0.0 and row["ci_high"] == pytest.approx(1 - 0.025 ** (1 / 10))
    assert row["verdict"] == INCONCLUSIVE  # [0, 0.31] overlaps [0.01, 0.02]
    inside = rate(
        CLAIM, setting="s", method="m", measure="p", successes=15, trials=1000, paper_range=(0.0, 0.1), test="t"
    )
    assert inside["verdict"] == HOLDS
    outside = rate(
        CLAIM, setting="s", method="m", measure="p", successes=500, trials=1000, paper_range=(0.01, 0.02), test="t"
    )
    assert outside["verdict"] == DOES_NOT_HOLD and outside["value"] == 0.5
    with pytest.raises(ValueError, match="^successes"):
        rate(CLAIM, setting="s", method="m", measure="p", successes=11, trials=10, paper_range=(0, 1), test="t")


def test_split_label_names_the_release_file_or_the_cut():
    cut = {"splits": {"test": {"file": "qbqtc/dev.json", "cut": {"from": "qbqtc/dev.json"}}}}
    assert evidence.split_label(cut) == "test (cut from qbqtc/dev.json)"
    assert evidence.split_label({"splits": {"test": {"file": "qbqtc/test_public.json"}}}) == "test_public"
    assert evidence.split_label({"generated": {"seed": 0}, "splits": {}}) == "test (generated)"


def test_claims_need_their_text():
    with pytest.raises(ValueError, match="^quote"):
        Claim("arXiv 1", "Table 1", "")


# ----------------------------------------------------------------------------- the page and metrics.json


PROVENANCE = {
    "source": "qbqtc",
    "data_root": "/somewhere/only/this/machine/has",
    "missing": ["qbqtc/train.json"],
    "splits": {
        "test": {
            "file": "qbqtc/dev.json",
            "cut": {"from": "qbqtc/dev.json", "method": "stratified_split", "seed": 0},
            "examples": 400,
        }
    },
}


def _run_folder(tmp_path: Path) -> Path:
    """A run folder as ``python -m workbench run`` leaves it: run.json and a notebook's metrics.json with evidence."""
    run_dir = tmp_path / "run"
    gold, a, b = _predictions()
    rows = [
        compare(
            CLAIM,
            setting="toy",
            method="a",
            baseline="b",
            metric=metric,
            y_true=gold,
            method_predictions=a,
            baseline_predictions=b,
            test="test (cut from qbqtc/dev.json)",
            num_labels=3,
            n_resamples=200,
        )
        for metric in ("macro_f1", "macro_mae")
    ]
    rows.append(
        rate(
            CLAIM,
            setting="s",
            method="m",
            measure="prediction level",
            successes=12,
            trials=900,
            paper_range=(0.01, 0.02),
            test="held-out texts",
        )
    )
    calibration, _ = evidence.calibration({"a": [np.full((400, 3), 1 / 3)]}, gold)
    record = evidence.record("A paper", "a toy probe.", [0, 1, 2], rows, PROVENANCE, calibration)
    write_metrics(run_dir / "01_toy", {"x": 1.0}, evidence=record)
    header = {
        "run_id": "run",
        "command": "python -m workbench run --params-set results",
        "params_set": "results",
        "started": "2026-01-01 10:00:00 UTC",
        "finished": "2026-01-01 11:00:00 UTC",
        "machine": {"cpu": "toy"},
    }
    write_json(run_dir / RUN_FILE, header)
    return run_dir


def _expected_line(row: dict) -> str:
    """The table line of a comparison row, formatted here from the JSON values on their own."""
    scale, digits = (1.0, 3) if row["metric"] == "macro_mae" else (100.0, 2)

    def stat(side: dict) -> str:
        return f"{scale * side['mean']:.{digits}f} ± {scale * side['std']:.{digits}f}"

    low, high = scale * row["ci_low"], scale * row["ci_high"]
    ci = f"{scale * row['difference']:+.{digits}f} [{low:+.{digits}f}, {high:+.{digits}f}]"
    label = {"macro_f1": "macro-F1", "macro_mae": "macro-MAE"}[row["metric"]]
    cells = [
        row["setting"],
        row["method"],
        row["baseline"],
        f"{label} (claimed: {row['expected']})",
        stat(row["method_score"]),
        stat(row["baseline_score"]),
        ci,
        f"{row['test']}, n = {row['n_test']:,}",
        row["verdict"],
    ]
    return "| " + " | ".join(cells) + " |"


def test_the_page_prints_the_numbers_of_metrics_json(tmp_path):
    run_dir = _run_folder(tmp_path)
    page = results_markdown(run_dir)
    recorded = json.loads((run_dir / "01_toy" / "metrics.json").read_text(encoding="utf-8"))["evidence"]
    lines = page.splitlines()
    for row in recorded["claims"]:
        if row["kind"] == "comparison":
            assert _expected_line(row) in lines
        else:
            assert f"{100 * row['value']:.2f}% [{100 * row['ci_low']:.2f}%, {100 * row['ci_high']:.2f}%]" in page
            assert f"{row['successes']:,} of {row['trials']:,}" in page
    ece = recorded["calibration"][0]["ece"]
    assert f"| a | {100 * ece['mean']:.2f} |" in lines  # one seed: the mean alone
    assert "python -m workbench run --params-set results" in page and "2026-01-01 11:00:00 UTC" in page
    assert f'> "{CLAIM.quote}"' in lines
    assert "/somewhere/only/this/machine/has" not in page  # the data root is a path of the machine, never printed
    assert "test 400 (cut from `qbqtc/dev.json` (stratified_split, seed 0))" in page


def test_every_number_in_a_table_row_comes_from_metrics_json(tmp_path):
    run_dir = _run_folder(tmp_path)
    rows = [line for line in results_markdown(run_dir).splitlines() if line.startswith("| toy |")]
    assert len(rows) == 2
    recorded = json.loads((run_dir / "01_toy" / "metrics.json").read_text(encoding="utf-8"))["evidence"]["claims"]
    assert rows == [_expected_line(row) for row in recorded if row["kind"] == "comparison"]


def test_results_md_index_section_and_the_command_agree(tmp_path, capsys):
    run_dir = _run_folder(tmp_path)
    assert write_results(run_dir, ["01_toy"]) == run_dir / RESULTS_FILE
    assert main(["results", str(run_dir), "-o", str(tmp_path / "results.md")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "results.md")
    assert (tmp_path / "results.md").read_text(encoding="utf-8") == (run_dir / RESULTS_FILE).read_text(encoding="utf-8")
    html = results_html(run_dir)
    assert "<table>" in html and f'<a href="{RESULTS_FILE}">' in html and "<h1>" not in html
    assert write_results(tmp_path / "run", []) is None  # no notebook with evidence: no page


def test_the_command_refuses_a_folder_without_claims(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    write_json(tmp_path / "empty" / RUN_FILE, {"run_id": "empty"})
    assert main(["results", str(tmp_path / "empty")]) == 2
    assert "no notebook recorded claims" in capsys.readouterr().err
    assert main(["results", str(tmp_path)]) == 2  # not a run folder: it has no run.json
    assert RUN_FILE in capsys.readouterr().err


def test_calibration_rows_by_hand():
    gold = np.array([0, 1, 1])
    probabilities = {"x": [np.array([[0.9, 0.1], [0.6, 0.4], [0.25, 0.75]]), np.array([[0.5, 0.5]] * 3)]}
    rows, bins = evidence.calibration(probabilities, gold, n_bins=10)
    first = (0.1 + 0.6 + 0.25) / 3
    second = abs(1 / 3 - 0.5)  # all in bin (0.4, 0.5]: argmax 0, one right
    assert rows[0]["ece"]["mean"] == pytest.approx((first + second) / 2)
    assert rows[0]["ece"]["std"] == pytest.approx(math.sqrt(((first - second) ** 2) / 2))
    assert sum(bins["x"]["count"]) == 6
