"""Claim rows, their assessment and the results page (workbench.evidence, workbench.runs.results): values against hand
computations, a page's numbers and verdicts against its run's metrics.json, and every bad input of
``python -m workbench results`` refused in one line naming the file and the key, with nothing written or lost
(issue 37 items 11, 12, 13 and 20)."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest
from sklearn.metrics import accuracy_score, f1_score

from workbench import evidence
from workbench.__main__ import main
from workbench.evidence import (
    DOES_NOT_HOLD,
    HOLDS,
    IDENTICAL,
    INCONCLUSIVE,
    NOT_TESTABLE,
    Claim,
    assess,
    check_record,
    compare,
    identity,
    rate,
    rate_p_value,
    trivial_baseline,
)
from workbench.metrics_file import write_json, write_metrics
from workbench.runs.results import RESULTS_FILE, RUN_FILE, results_html, results_markdown, write_page, write_results
from workbench.stats import holm

CLAIM = Claim("arXiv 0000.00000", "Table 1", "Our loss is better.")
COUNTS = [40, 30, 30]


def _predictions(seed: int = 0, n: int = 400, seeds: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, 3, n)
    a = np.where(rng.random((seeds, n)) < 0.8, gold, rng.integers(0, 3, (seeds, n)))
    b = np.where(rng.random((seeds, n)) < 0.5, gold, rng.integers(0, 3, (seeds, n)))
    return gold, a, b


def _compare(gold, a, b, **changes):
    arguments = dict(
        setting="toy",
        method="a",
        baseline="b",
        metric="macro_f1",
        y_true=gold,
        method_predictions=a,
        baseline_predictions=b,
        test="test (cut from qbqtc/dev.json)",
        num_labels=3,
        train_counts=COUNTS,
        n_resamples=300,
    )
    return compare(CLAIM, **{**arguments, **changes})


def test_compare_by_hand():
    gold, a, b = _predictions()
    row = _compare(gold, {s: a[s] for s in range(3)}, {s: b[s] for s in range(3)}, paper_difference=(2.6, 0.5))
    scores_a = [f1_score(gold, a[s], average="macro") for s in range(3)]
    scores_b = [f1_score(gold, b[s], average="macro") for s in range(3)]
    assert row["method_score"]["mean"] == pytest.approx(np.mean(scores_a))
    assert row["method_score"]["std"] == pytest.approx(np.std(scores_a, ddof=1))
    assert row["baseline_score"]["n"] == 3
    assert row["difference"] == pytest.approx(np.mean(scores_a) - np.mean(scores_b))
    assert row["ci_low"] > 0 and row["verdict"] == HOLDS
    assert row["paper_difference"] == pytest.approx([0.005, 0.026])  # printed points, stored as fractions, sorted
    assert (row["n_test"], row["n_seeds"], row["quote"], row["where"]) == (400, 3, CLAIM.quote, "Table 1")
    assert row["decision_rule"] == "argmax"


def test_trivial_baseline_by_hand():
    gold = np.array([0, 0, 0, 1, 2, 2])  # test counts 3, 1, 2
    majority = trivial_baseline(gold, [10, 5, 5], "accuracy", 3)
    assert (majority["score"], majority["rule"], majority["majority"]) == (0.5, "always class 0", 0.5)
    # the prior (1/2, 1/4, 1/4): expected accuracy 3/6 x 1/2 + 1/6 x 1/4 + 2/6 x 1/4 = 0.375
    assert majority["prior"] == pytest.approx(0.375)
    f1 = trivial_baseline(gold, [10, 5, 5], "macro_f1", 3)
    # always class 0: F1 of class 0 = 2 x 3 / (3 + 6) = 2/3, others 0: macro 2/9; the prior guess's expected
    # confusion gives F1_k = 2 n_k p_k / (n_k + 6 p_k): 3/6, 0.5/2.5, 1/3.5; macro (1/2 + 1/5 + 2/7) / 3
    assert f1["majority"] == pytest.approx(2 / 9)
    assert f1["prior"] == pytest.approx((1 / 2 + 1 / 5 + 2 / 7) / 3)
    assert f1["score"] == f1["prior"] and f1["rule"] == "guessing by the training prior"
    with pytest.raises(ValueError, match="^train_counts"):
        trivial_baseline(gold, [1, 2], "accuracy", 3)


def test_identical_by_construction_is_decided_by_the_caller_and_checked_on_the_predictions():
    gold, a, _ = _predictions()
    row = identity(
        CLAIM,
        setting="toy",
        method="PCL as released",
        baseline="LS",
        reason="a constant per cell: the gradient is LS's",
        method_predictions=a,
        baseline_predictions=a.copy(),
        test="t",
    )
    assert (row["kind"], row["verdict"], row["identical_seeds"], row["n_seeds"]) == ("identity", IDENTICAL, 3, 3)
    # equal predictions alone are not an identity: compare() gives a [0, 0] interval, a non-significant p, no claim
    same = _compare(gold, a, a.copy(), metric="accuracy")
    assert (same["difference"], same["ci_low"], same["ci_high"], same["p_value"]) == (0.0, 0.0, 0.0, 1.0)
    assert same["verdict"] == INCONCLUSIVE
    assert same["method_score"]["mean"] == pytest.approx(np.mean([accuracy_score(gold, p) for p in a]))


def test_one_decision_rule_for_both_sides_and_seeds_paired_by_name():
    gold, a, b = _predictions()
    with pytest.raises(ValueError, match="^baseline_predictions: must hold the method's seeds"):
        _compare(gold, {0: a[0], 1: a[1]}, {0: b[0], 2: b[2]})
    with pytest.raises(ValueError, match="^decision_rule"):
        _compare(gold, a, b, decision_rule="")


def test_not_testable_below_two_seeds_a_minimum_test_size_or_at_chance():
    """Issue 37 item 11: one seed, one test example or two majority-only models give no verdict; the row says why."""
    gold, a, b = _predictions()
    one_seed = _compare(gold, a[:1], b[:1])
    assert one_seed["verdict"] == NOT_TESTABLE
    assert evidence.why_not_tested(one_seed).startswith("1 seed: no run-to-run variance")
    small = _compare(gold[:50], a[:, :50], b[:, :50])
    assert small["verdict"] == NOT_TESTABLE and evidence.why_not_tested(small).startswith("50 test examples")
    majority = np.zeros_like(a)
    chance = _compare(gold, majority, majority.copy(), metric="accuracy")
    assert chance["verdict"] == NOT_TESTABLE
    assert evidence.failing_sides(chance) == ["a", "b"]
    collapsed = _compare(gold, majority, b)
    assert evidence.failing_sides(collapsed) == ["a"] and collapsed["verdict"] == NOT_TESTABLE


def test_rates_by_hand_and_dual_to_their_exact_interval():
    # 0 of 10: the exact upper bound solves (1 - p)^10 = 0.025; the event never occurs: not testable
    row = rate(
        CLAIM, setting="s", method="m", measure="prediction", successes=0, trials=10, paper_range=(0.01, 0.02), test="t"
    )
    assert row["ci_low"] == 0.0 and row["ci_high"] == pytest.approx(1 - 0.025 ** (1 / 10))
    assert row["verdict"] == NOT_TESTABLE
    inside = rate(
        CLAIM, setting="s", method="m", measure="p", successes=15, trials=1000, paper_range=(0.0, 0.1), test="t"
    )
    assert inside["verdict"] == HOLDS
    outside = rate(
        CLAIM, setting="s", method="m", measure="p", successes=500, trials=1000, paper_range=(0.01, 0.02), test="t"
    )
    assert outside["verdict"] == DOES_NOT_HOLD and outside["value"] == 0.5
    for successes, trials, low, high in ((12, 900, 0.01, 0.02), (3, 900, 0.01, 0.02), (40, 900, 0.01, 0.02)):
        exact = binomtest(successes, trials).proportion_ci(0.95, method="exact")
        excludes_outside = low <= exact.low and exact.high <= high
        excludes_inside = exact.high < low or exact.low > high
        assert (rate_p_value(successes, trials, low, high) < 0.05) == (excludes_outside or excludes_inside)
    with pytest.raises(ValueError, match="^successes"):
        rate(CLAIM, setting="s", method="m", measure="p", successes=11, trials=10, paper_range=(0, 1), test="t")


def test_the_family_is_adjusted_by_holm_and_verdicts_read_the_adjusted_p():
    gold, a, b = _predictions()
    strong = _compare(gold, a, b)
    weak = _compare(gold, b, np.where(np.random.default_rng(1).random(b.shape) < 0.1, gold, b))
    judged = assess([strong, weak, strong])
    raw = [evidence.two_sided_p(r["difference"], r["se"], r["df"] or math.inf) for r in (strong, weak, strong)]
    assert [entry["p_holm"] for entry in judged] == pytest.approx(holm(raw))
    for row, entry in zip((strong, weak, strong), judged):
        expected = HOLDS if entry["p_holm"] < 0.05 and row["difference"] > 0 else INCONCLUSIVE
        if entry["p_holm"] < 0.05 and row["difference"] < 0:
            expected = DOES_NOT_HOLD
        assert entry["verdict"] == expected


def test_a_paper_sized_gain_is_excluded_only_when_the_difference_lies_significantly_short_of_it():
    gold, a, b = _predictions()
    row = _compare(gold, a, b, paper_difference=90.0)  # the paper claims +90 points: far above this difference
    entry = assess([row])[0]
    assert entry["paper_excluded"] is True
    near = _compare(gold, a, b, paper_difference=100 * row["difference"])
    assert assess([near])[0]["paper_excluded"] is False
    df = math.inf if row["df"] is None else row["df"]
    assert entry["detectable"] == pytest.approx(evidence.detectable_difference(row["se"], df))


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


def _record() -> dict:
    gold, a, b = _predictions()
    rows = [_compare(gold, a, b, metric=metric, paper_difference=2.0) for metric in ("macro_f1", "accuracy")]
    rows.append(_compare(gold, np.zeros_like(a), b, method="collapsed"))
    rows.append(
        identity(
            CLAIM,
            setting="toy",
            method="PCL",
            baseline="LS",
            reason="a constant per cell",
            method_predictions=b,
            baseline_predictions=b,
            test="t",
        )
    )
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
    calibration, bins = evidence.calibration({"a": [np.full((400, 3), 1 / 3)]}, gold)
    return evidence.record(
        "A paper",
        "a toy probe.",
        [0, 1, 2],
        rows,
        PROVENANCE,
        calibration,
        sizes=[evidence.size("probe", 1234, 800, 60)],
        paper_scale={"model": "BERT", "parameters": "110 M", "training examples": "1,000"},
        fixed={"learning rate": 0.01},
        reliability=bins,
    )


def _run_folder(tmp_path: Path, record: dict | None = None) -> Path:
    """A run folder as ``python -m workbench run`` leaves it: run.json (with its notebook folders) and a notebook's
    metrics.json with evidence."""
    run_dir = tmp_path / "run"
    write_metrics(run_dir / "01_toy", {"x": 1.0}, evidence=record or _record())
    header = {
        "run_id": "run",
        "command": "python -m workbench run --params-set results",
        "params_set": "results",
        "started": "2026-01-01 10:00:00 UTC",
        "finished": "2026-01-01 11:00:00 UTC",
        "machine": {"cpu": "toy"},
        "folders": ["01_toy"],
    }
    write_json(run_dir / RUN_FILE, header)
    return run_dir


def _table_line(row: dict, entry: dict) -> str:
    """The table line of a comparison row, formatted here from the JSON values and the recomputed assessment."""

    def stat(side: dict) -> str:
        return f"{100 * side['mean']:.2f} ± {100 * side['std']:.2f}"

    def p(value: float) -> str:
        return "< 0.001" if value < 0.001 else f"{value:.3f}"

    ci = f"{100 * row['difference']:+.2f} [{100 * row['ci_low']:+.2f}, {100 * row['ci_high']:+.2f}]"
    label = {"macro_f1": "macro-F1", "accuracy": "accuracy"}[row["metric"]]
    df = "∞" if row["df"] is None else f"{row['df']:.1f}"
    cells = [
        row["setting"],
        row["decision_rule"],
        row["method"],
        row["baseline"],
        f"{label} (claimed: {row['expected']})",
        stat(row["method_score"]),
        stat(row["baseline_score"]),
        ci,
        f"{100 * row['se']:.2f} ({df})",
        f"{p(entry['p'])} ({p(entry['p_holm'])})",
        f"{100 * entry['detectable']:.2f}",
        ", ".join(f"{100 * value:+.2f}" for value in row["paper_difference"]),
        "no paper-sized gain" if entry["paper_excluded"] else "not excluded",
        f"{row['n_seeds']} x {row['n_test']:,}",
        entry["verdict"],
    ]
    return "| " + " | ".join(cells) + " |"


def test_every_number_and_verdict_of_the_page_is_recomputed_from_metrics_json(tmp_path):
    run_dir = _run_folder(tmp_path)
    page = results_markdown(run_dir)
    recorded = json.loads((run_dir / "01_toy" / "metrics.json").read_text(encoding="utf-8"))["evidence"]
    judged = assess(recorded["claims"])
    lines = page.splitlines()
    tested = [(row, entry) for row, entry in zip(recorded["claims"], judged) if row["kind"] == "comparison"]
    for row, entry in tested[:2]:
        assert _table_line(row, entry) in lines
    assert [entry["status"] for entry in judged] == ["tested", "tested", NOT_TESTABLE, IDENTICAL, "tested"]
    assert "| 01_toy | probe | 1,234 | 800 | 60 | BERT | 110 M | 1,000 |" in lines
    assert "Fixed, not chosen on validation (the same for every side): learning rate 0.01." in lines
    assert "collapsed at or below the trivial baseline" in page
    assert f'> "{CLAIM.quote}"' in lines
    assert "/somewhere/only/this/machine/has" not in page  # the data root is a path of the machine, never printed
    assert "python -m workbench run --params-set results" in page and "2026-01-01 11:00:00 UTC" in page
    assert "## Summary" in page and page.index("## Summary") < page.index("## 01_toy")


def test_a_stored_verdict_is_never_copied(tmp_path):
    """Issue 37 item 12: a row that says "holds" over an interval across 0 prints the verdict its numbers give."""
    record = _record()
    row = record["claims"][0]
    row["difference"], row["ci_low"], row["ci_high"], row["se"], row["df"] = 0.001, -0.0186, 0.0206, 0.01, None
    row["ci_low"], row["ci_high"] = evidence.interval_of(0.001, 0.01, math.inf)
    row["verdict"] = HOLDS
    page = results_markdown(_run_folder(tmp_path, record))
    line = next(line for line in page.splitlines() if line.startswith("| toy | argmax | a | b | macro-F1"))
    assert line.endswith(f"| {INCONCLUSIVE} |")


def _damaged(tmp_path: Path, change) -> tuple[Path, Path]:
    record = copy.deepcopy(_record())
    change(record)
    run_dir = _run_folder(tmp_path, record)
    return run_dir, run_dir / "01_toy" / "metrics.json"


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (lambda r: r["claims"][0].pop("ci_high"), "evidence.claims[0].ci_high: missing"),
        (lambda r: r["claims"][0].update(metric="auc"), "evidence.claims[0].metric: must be one of"),
        (lambda r: r["claims"][1].update(difference=float("nan")), "evidence.claims[1].difference: must be a finite"),
        (lambda r: r["claims"][0].update(ci_high=0.5), "evidence.claims[0].ci_high: 0.5 disagrees with difference"),
        (lambda r: r["claims"][0].update(n_seeds=2), "evidence.claims[0].n_seeds: must equal the notebook's 3 seeds"),
        (lambda r: r["claims"][0]["method_score"].update(n=1), "evidence.claims[0].method_score.n: must equal"),
        (lambda r: r["claims"][4].update(ci_low=0.0), "evidence.claims[4].ci_low: 0.0 disagrees with successes"),
        (lambda r: r.update(seeds=[0, 1]), "evidence.claims[0].n_seeds: must equal the notebook's 2 seeds"),
        (lambda r: r["claims"][3].pop("reason"), "evidence.claims[3].reason: missing"),
    ],
)
def test_the_command_refuses_a_row_it_cannot_print_truthfully(tmp_path, capsys, change, key):
    """Issue 37 items 12 and 20: one line naming the file and the key, exit 2, no page written."""
    run_dir, metrics = _damaged(tmp_path, change)
    assert main(["results", str(run_dir), "-o", str(tmp_path / "page.md")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"error: {metrics}: {key}") and "\n" not in error
    assert not (tmp_path / "page.md").exists() and not (run_dir / RESULTS_FILE).exists()


@pytest.mark.parametrize("name", [RUN_FILE, "01_toy/metrics.json"])
def test_a_truncated_json_file_is_named(tmp_path, capsys, name):
    run_dir = _run_folder(tmp_path)
    path = run_dir / name
    path.write_text(path.read_text(encoding="utf-8")[:-20], encoding="utf-8")
    assert main(["results", str(run_dir), "-o", str(tmp_path / "page.md")]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"error: {path}: not valid JSON (") and "\n" not in error
    assert not (tmp_path / "page.md").exists()


def test_only_the_folders_the_run_recorded_are_read(tmp_path):
    """Issue 37 item 12: a notebook folder copied in from another run is not printed under this run's command."""
    run_dir = _run_folder(tmp_path)
    write_metrics(run_dir / "02_stranger", {"x": 1.0}, evidence=_record() | {"title": "Copied in"})
    assert "Copied in" not in results_markdown(run_dir)
    header = json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8"))
    del header["folders"]
    write_json(run_dir / RUN_FILE, header)
    with pytest.raises(ValueError, match=r"run\.json: folders: must list the run's notebook folders"):
        results_markdown(run_dir)


@pytest.mark.parametrize("target", [RUN_FILE, "01_toy/metrics.json", "01_toy/other.md", "01_toy"])
def test_the_output_never_replaces_a_file_of_the_run(tmp_path, capsys, target):
    """Issue 37 items 13 and 20: -o onto the run's own inputs (or a folder) is refused; nothing changes."""
    run_dir = _run_folder(tmp_path)
    before = {path: path.read_bytes() for path in run_dir.rglob("*") if path.is_file()}
    assert main(["results", str(run_dir), "-o", str(run_dir / target)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith(f"error: -o {str(run_dir / target)!r}: ") and "\n" not in error
    assert {path: path.read_bytes() for path in run_dir.rglob("*") if path.is_file()} == before


def test_the_output_folder_must_exist(tmp_path, capsys):
    run_dir = _run_folder(tmp_path)
    assert main(["results", str(run_dir), "-o", str(tmp_path / "missing" / "page.md")]) == 2
    assert "its folder" in capsys.readouterr().err and not (tmp_path / "missing").exists()


def test_results_md_index_section_and_the_command_agree(tmp_path, capsys):
    run_dir = _run_folder(tmp_path)
    assert write_results(run_dir) == run_dir / RESULTS_FILE
    assert (run_dir / "results-figures" / "forest.svg").read_text(encoding="utf-8").startswith("<svg")
    assert (run_dir / "results-figures" / "01_toy-reliability.svg").is_file()
    assert main(["results", str(run_dir), "-o", str(tmp_path / "results.md")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "results.md")
    assert (tmp_path / "results.md").read_text(encoding="utf-8") == (run_dir / RESULTS_FILE).read_text(encoding="utf-8")
    assert (tmp_path / "results-figures" / "forest.svg").is_file()  # the page's figures beside it
    assert write_page(run_dir, run_dir / RESULTS_FILE) == run_dir / RESULTS_FILE  # its own page may be rewritten
    html = results_html(run_dir)
    assert "<table>" in html and f'<a href="{RESULTS_FILE}">' in html and "<h1>" not in html


def test_the_command_refuses_a_folder_without_claims(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    write_json(tmp_path / "empty" / RUN_FILE, {"run_id": "empty", "folders": []})
    assert main(["results", str(tmp_path / "empty")]) == 2
    assert "no notebook recorded claims" in capsys.readouterr().err
    assert main(["results", str(tmp_path)]) == 2  # not a run folder: it has no run.json
    assert RUN_FILE in capsys.readouterr().err


def test_check_record_accepts_what_record_writes():
    check_record(json.loads(json.dumps(_record())))


def test_calibration_rows_by_hand():
    gold = np.array([0, 1, 1])
    probabilities = {"x": [np.array([[0.9, 0.1], [0.6, 0.4], [0.25, 0.75]]), np.array([[0.5, 0.5]] * 3)]}
    rows, bins = evidence.calibration(probabilities, gold, n_bins=10)
    first = (0.1 + 0.6 + 0.25) / 3
    second = abs(1 / 3 - 0.5)  # all in bin (0.4, 0.5]: argmax 0, one right
    assert rows[0]["ece"]["mean"] == pytest.approx((first + second) / 2)
    assert rows[0]["ece"]["std"] == pytest.approx(math.sqrt(((first - second) ** 2) / 2))
    assert sum(bins["x"]["count"]) == 6
