"""The check bench's own arithmetic: AUC against counting every pair, the threshold against every cut,
the logistic fit at its optimum, and the LaTeX its drafts are written in."""

import numpy as np
import pytest
from bench.check import _tex, auc, best_threshold, fit_logistic


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_auc_counts_every_pair_ties_half(seed):
    rng = np.random.default_rng(seed)
    pos, neg = rng.integers(0, 6, 40).astype(float), rng.integers(0, 6, 30).astype(float)
    pairs = [(p > n) + 0.5 * (p == n) for p in pos for n in neg]
    assert auc(pos, neg) == pytest.approx(np.mean(pairs))
    assert np.isnan(auc([], neg))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_threshold_is_a_best_cut_by_balanced_accuracy(seed):
    rng = np.random.default_rng(seed)
    pos, neg = rng.normal(1, 1, 50), rng.normal(0, 1, 70)

    def bal(t):
        return (pos >= t).mean() + (neg < t).mean()

    t = best_threshold(pos, neg)
    assert bal(t) == pytest.approx(max(bal(c) for c in np.r_[pos, neg, np.inf]))


def test_the_logistic_fit_is_at_its_optimum():
    rng = np.random.default_rng(4)
    x = np.c_[np.ones(400), rng.normal(size=(400, 2))]
    y = (rng.random(400) < 1 / (1 + np.exp(-(x @ [0.5, 2.0, -1.0])))).astype(float)
    w = np.where(y == 1, 1.0, 0.5)
    b = fit_logistic(x, y, w, l2=1e-3)
    p = 1 / (1 + np.exp(-(x @ b)))
    assert np.abs(x.T @ (w * (y - p)) - 1e-3 * b).max() < 1e-8  # the weighted, ridged gradient is zero
    assert b[1] > 1 and b[2] < -0.5


def test_claims_are_written_as_latex_prose():
    assert _tex("5% of $10 claims") == "5\\% of \\$10 claims"


def test_a_monotone_fit_keeps_every_weight_but_the_intercept_at_or_above_zero():
    rng = np.random.default_rng(5)
    x = np.c_[np.ones(400), rng.normal(size=(400, 2))]
    y = (rng.random(400) < 1 / (1 + np.exp(-(x @ [0.0, 2.0, -1.0])))).astype(float)
    b = fit_logistic(x, y, np.ones(400), monotone=True)
    assert b[2] == 0.0 and b[1] > 1
    alone = fit_logistic(x[:, :2], y, np.ones(400))
    assert b[:2] == pytest.approx(alone, abs=1e-9)  # the feature dropped, the rest fitted again
