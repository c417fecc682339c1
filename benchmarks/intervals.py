"""Coverage and width of the results page's interval in a crossed simulation: test examples x training seeds.

``python -m benchmarks intervals [--replicates R] [--resamples B] [--seed SEED]``

Each replicate draws a test set of n examples from a population and trains S = 5 "seeds" of two methods on it: an
example has a difficulty theta_i ~ N(0, 1.5^2) shared by both methods and a method-specific effect eta_mi ~ N(0,
0.5^2) (some examples suit one method); a run of method m with seed s shifts every example's logit by u_ms ~ N(0,
tau^2); an example is right with probability sigmoid(mu_m + theta_i + eta_mi + u_ms), drawn afresh for every run (a
seed changes which examples are right), and a wrong prediction is another class at random. Scenarios:

* ``reshuffle``: tau = 0, seeds only reshuffle which examples are right (the interaction of examples and seeds);
* ``runs differ`` (small and large): tau > 0, a seed also moves the whole run's score.

The true difference is the population's: E_u[metric(a)] - E_u[metric(b)] at infinite n, each method's confusion
matrix the expected one given its run shift u, integrated over u and over theta + eta by Gauss-Hermite quadrature.
"Needed" is the width of the oracle interval, 2 x 1.96 x the standard deviation of the estimate over the replicates.
Each scenario reports the coverage and the mean width / needed for ``workbench.stats.paired_ci`` (after) and for the
two-level percentile bootstrap it replaces (before: resampling test examples and seed pairs; issue 36 item 4).
Targets: coverage >= 0.93 and width / needed <= 1.3 in every scenario.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from workbench.metrics import confusion_scores
from workbench.stats import paired_ci

COVERAGE_TARGET = 0.93
WIDTH_TARGET = 1.3
SEEDS = 5


@dataclass(frozen=True)
class Scenario:
    """A crossed design: ``n`` test examples, ``seeds`` runs per method, run shift sd ``tau`` (logit scale)."""

    name: str
    tau: float
    n: int = 1000
    seeds: int = SEEDS
    k: int = 3
    metric: str = "macro_f1"
    mu: tuple[float, float] = (0.55, 0.45)  # the two methods' mean logits of being right
    theta_sd: float = 1.5
    eta_sd: float = 0.5


SCENARIOS = (
    Scenario("reshuffle", tau=0.0),
    Scenario("runs differ (small)", tau=0.08),
    Scenario("runs differ (large)", tau=0.2),
    Scenario("reshuffle, binary F1 (n = 846)", tau=0.0, n=846, k=2, metric="f1_positive"),
    Scenario("runs differ, binary F1 (n = 846)", tau=0.15, n=846, k=2, metric="f1_positive"),
)


def _expected_confusion(right: float, k: int) -> np.ndarray:
    """The population's confusion proportions (uniform gold classes) when an example is right with probability
    ``right`` and a wrong prediction is another class at random."""
    off = (1 - right) / (k - 1) / k
    return np.full((k, k), off) + np.eye(k) * (right / k - off)


def true_difference(scenario: Scenario) -> float:
    """metric(a) - metric(b) of the population, averaged over run shifts (Gauss-Hermite quadrature, 60 nodes)."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(60)
    weights = weights / weights.sum()
    spread = math.hypot(scenario.theta_sd, scenario.eta_sd)
    scores = []
    for mu in scenario.mu:
        runs = []
        for u in scenario.tau * nodes:
            right = float((weights / (1 + np.exp(-(mu + u + spread * nodes)))).sum())
            runs.append(float(confusion_scores(_expected_confusion(right, scenario.k), scenario.metric)))
        scores.append(float((weights * np.asarray(runs)).sum()))
    return scores[0] - scores[1]


def draw(scenario: Scenario, generator: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One replicate: gold labels (n,) and both methods' predictions (S, n)."""
    n, seeds, k = scenario.n, scenario.seeds, scenario.k
    gold = generator.integers(0, k, n)
    theta = generator.normal(0, scenario.theta_sd, n)
    sides = []
    for mu in scenario.mu:
        eta = generator.normal(0, scenario.eta_sd, n)
        shift = generator.normal(0, scenario.tau, (seeds, 1)) if scenario.tau > 0 else np.zeros((seeds, 1))
        right = generator.random((seeds, n)) < 1 / (1 + np.exp(-(mu + theta + eta + shift)))
        wrong = (gold + generator.integers(1, k, (seeds, n))) % k
        sides.append(np.where(right, gold, wrong))
    return gold, sides[0], sides[1]


def two_level_bootstrap(
    gold: np.ndarray, a: np.ndarray, b: np.ndarray, metric: str, k: int, n_resamples: int, seed: int
) -> tuple[float, float]:
    """Before: the percentile interval of a bootstrap that resamples the test examples and then the seed pairs."""
    generator = np.random.default_rng(seed)
    seeds, n = a.shape
    cells = np.stack([gold * k + a, gold * k + b]) + np.arange(2 * seeds).reshape(2, seeds, 1) * k * k
    estimates = []
    for _ in range(n_resamples):
        counts = np.bincount(cells[:, :, generator.integers(0, n, n)].ravel(), minlength=2 * seeds * k * k)
        scores = confusion_scores(counts.reshape(2, seeds, k, k), metric)
        per_seed = scores[0] - scores[1]
        estimates.append(per_seed[generator.integers(0, seeds, seeds)].mean())
    low, high = np.quantile(estimates, [0.025, 0.975])
    return float(low), float(high)


def simulate(
    scenario: Scenario, replicates: int, n_resamples: int, seed: int = 0, before: bool = True
) -> dict[str, float]:
    """Coverage and mean width / needed over ``replicates`` for ``paired_ci`` (and the two-level bootstrap)."""
    truth = true_difference(scenario)
    generator = np.random.default_rng(seed)
    estimates, after, old = [], [], []
    for replicate in range(replicates):
        gold, a, b = draw(scenario, generator)
        result = paired_ci(gold, a, b, scenario.metric, n_resamples, replicate, num_labels=scenario.k)
        estimates.append(result["difference"])
        after.append((result["low"], result["high"]))
        if before:
            old.append(two_level_bootstrap(gold, a, b, scenario.metric, scenario.k, n_resamples, replicate))
    needed = 2 * 1.959964 * float(np.std(estimates, ddof=1))
    summary = {"truth": truth, "needed": needed}
    for name, intervals in (("after", after), ("before", old)):
        if intervals:
            bounds = np.asarray(intervals)
            summary[f"{name}_coverage"] = float(np.mean((bounds[:, 0] <= truth) & (truth <= bounds[:, 1])))
            summary[f"{name}_width"] = float(np.mean(bounds[:, 1] - bounds[:, 0]) / needed)
    return summary


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks intervals", description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicates", type=int, default=1000)
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples per interval")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    print(
        f"{args.replicates} replicates, {args.resamples} resamples, {SEEDS} seeds; targets: coverage >= "
        f"{COVERAGE_TARGET}, width / needed <= {WIDTH_TARGET}\n"
    )
    print(
        "| scenario | n | tau | true difference | before: coverage | before: width / needed "
        "| after: coverage | after: width / needed | seconds |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for scenario in SCENARIOS:
        start = time.perf_counter()
        result = simulate(scenario, args.replicates, args.resamples, args.seed)
        print(
            f"| {scenario.name} | {scenario.n} | {scenario.tau:g} | {100 * result['truth']:+.2f} "
            f"| {result['before_coverage']:.3f} | {result['before_width']:.2f} "
            f"| {result['after_coverage']:.3f} | {result['after_width']:.2f} | {time.perf_counter() - start:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
