"""The models strategies learn from, each a scikit-learn estimator so any of them plugs into any strategy."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from sklearn import config_context
from sklearn.ensemble import ExtraTreesRegressor
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel
from sklearn.linear_model import RidgeCV
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import OneHotEncoder, PolynomialFeatures, StandardScaler
from sklearn.tree import ExtraTreeRegressor
from sklearn.utils import check_array

from launchtune.kernels.workload import SEED_MAX

from ..learn.models import seed_mlp_regressor

# Hidden layers of the seed's MLP: the paper (Xue & Roy, Table 2) gives every other hyperparameter but not the
# layer sizes ("multiple hidden layers"); we chose three layers of 64, a common size for 14 inputs that trains
# in well under a second on a few hundred samples.
SEED_MLP_HIDDEN = (64, 64, 64)
# Trees are fitted and asked on this many threads: each tree has its own seed, drawn before any is fitted, and
# predicts alone, so the numbers are the same on any count; a search's forest was over half of its host time
# per measurement (issue 53: 3.4 of 6 CPU seconds of evolve at 200 on the fused CFD replay).
FOREST_THREADS = max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1))


def seed_mlp(seed: int, hidden: tuple[int, ...] = SEED_MLP_HIDDEN) -> Pipeline:
    """The seed's network (Table 2): StandardScaler then a ReLU MLP trained by Adam, 200 epochs."""
    return make_pipeline(
        StandardScaler(), seed_mlp_regressor(hidden, max_epochs=200, seed=seed, batch_size=200)
    )


def additive(n_params: int) -> Pipeline:
    """log time = one effect per parameter value + one per pair of parameter values, ridge-shrunk.

    Launch parameters act multiplicatively (twice the threads, half the blocks), so effects add on log time;
    the pair terms catch the interactions that matter most (block shape x tile shape) without a black box.
    """
    steps: list = [OneHotEncoder(handle_unknown="ignore", sparse_output=False)]
    if n_params > 1:
        steps.append(PolynomialFeatures(degree=2, interaction_only=True, include_bias=False))
    return make_pipeline(*steps, RidgeCV(alphas=np.logspace(-3, 2, 11)))


def library_seed(seed: int) -> int:
    """A strategy's derived seed (its own plus a round number) within scikit-learn's ``random_state`` range:
    the user's seed is at most ``SEED_MAX`` (checked on the command line), the derived one wraps."""
    return int(seed) % (SEED_MAX + 1)


def forest(
    seed: int, n_estimators: int = 100, bootstrap: bool = False, max_features: float | str = 1.0
) -> ExtraTreesRegressor:
    """Randomised trees: the spread of their predictions is the uncertainty an iterative search explores.
    ``bootstrap``: each tree learns from its own resample of the measurements, so trees also disagree on what
    was measured and one tree is a draw from a posterior, not only a smoother (Thompson sampling).
    ``max_features``: the features each split draws from (scikit-learn's; all by default)."""
    return ExtraTreesRegressor(
        n_estimators=n_estimators,
        min_samples_leaf=1,
        bootstrap=bootstrap,
        max_features=max_features,
        random_state=library_seed(seed),
        n_jobs=FOREST_THREADS,
    )


def fitted_trees(
    seed: int, X: np.ndarray, y: np.ndarray, n_estimators: int, max_features: float | str = 1.0
) -> list[ExtraTreeRegressor]:
    """The trees of ``forest(seed, n_estimators, max_features=max_features).fit(X, y)``, the same numbers
    (each tree's seed drawn in turn from ``seed`` as the forest draws it), grown without the forest's set-up
    per tree: its clone and ``get_params`` (signature inspection) took 0.7 ms a tree, more than growing one
    on a search's few hundred rows (issue 53: a sixth of an ``evolve`` search's host time). The inputs are
    checked once here, so each tree skips its checks."""
    draw = np.random.RandomState(library_seed(seed))
    seeds = [draw.randint(np.iinfo(np.int32).max) for _ in range(n_estimators)]
    X32 = check_array(X, dtype=np.float32)
    y64 = np.ascontiguousarray(y, dtype=np.float64)
    trees = [ExtraTreeRegressor(max_features=max_features, random_state=s) for s in seeds]

    def grow(tree: ExtraTreeRegressor) -> ExtraTreeRegressor:
        # inside the thread that grows the tree: scikit-learn's config is thread-local
        with config_context(skip_parameter_validation=True):
            return tree.fit(X32, y64, check_input=False)

    if FOREST_THREADS == 1 or n_estimators == 1:
        return [grow(t) for t in trees]
    with ThreadPoolExecutor(FOREST_THREADS) as pool:  # trees grow with the GIL released
        return list(pool.map(grow, trees))


def forest_predictions(model: ExtraTreesRegressor | list[ExtraTreeRegressor], X: np.ndarray) -> np.ndarray:
    """Every tree's prediction for every row of ``X`` (trees x rows): their mean is the forest's, their spread
    its uncertainty, and one tree's row is a draw for Thompson sampling. ``model``: a fitted forest, or its
    trees (:func:`fitted_trees`).

    ``X`` is checked and converted to the trees' float32 once, then each tree predicts without checking again,
    as the forest's own ``predict`` does: checking a 50,000-candidate pool per tree was three quarters of an
    ``iterative`` search's host time (22 of 29 s at 100 measurements; the same numbers either way)."""
    X32 = check_array(X, dtype=np.float32, order="C")
    trees = model if isinstance(model, list) else model.estimators_
    if FOREST_THREADS == 1 or len(trees) == 1:
        return np.stack([t.predict(X32, check_input=False) for t in trees])
    with ThreadPoolExecutor(FOREST_THREADS) as pool:  # trees predict with the GIL released
        return np.stack(list(pool.map(lambda t: t.predict(X32, check_input=False), trees)))


def _wide_positive_int(col: np.ndarray) -> bool:
    return bool(col.min() > 0 and col.max() / col.min() > 4 and np.all(col == np.round(col)))


def log_features(X: np.ndarray) -> np.ndarray:
    """Launch sizes act on a log scale (16 vs 32 threads matters as much as 128 vs 256): log2 of every column
    whose values are positive integers spanning more than a factor of 4; other columns as they are."""
    X = np.asarray(X, dtype=float)
    out = X.copy()
    for j in range(X.shape[1]):
        if _wide_positive_int(X[:, j]):
            out[:, j] = np.log2(X[:, j])
    return out


def launch_features(X: np.ndarray, unused: np.ndarray | None = None) -> np.ndarray:
    """Each parameter, plus for every launch size its log2, whether it is a power of two and its largest
    power-of-two divisor: hardware runs threads in warps (32) or wavefronts (64), so a block of 64, 128 or 256
    can be ten times faster than one of 80 or 192 on the same GPU (MI250X in the convolution data), a step no
    smooth function of the size itself can learn from a few samples.

    ``unused`` (rows x parameters, ``Session.unused``) marks the parameters a configuration does not use (the
    fused CFD levels ignore the seven kernels' launches): their columns are 0 there, so trees do not split on
    values that change nothing."""
    X = np.asarray(X, dtype=float)
    cols = []
    for j in range(X.shape[1]):
        c = X[:, j]
        mine = [c]
        if _wide_positive_int(c):
            ci = c.astype(np.int64)
            mine += [np.log2(c), ((ci & (ci - 1)) == 0).astype(float), np.log2((ci & -ci).astype(float))]
        if unused is not None and unused[:, j].any():
            mine = [np.where(unused[:, j], 0.0, m) for m in mine]
        cols += mine
    return np.column_stack(cols)


def gaussian_process(n_features: int, seed: int) -> Pipeline:
    kernel = ConstantKernel(1.0) * Matern(length_scale=np.ones(n_features), nu=2.5) + WhiteKernel(1e-3)
    gp = GaussianProcessRegressor(
        kernel=kernel, normalize_y=True, n_restarts_optimizer=0, random_state=library_seed(seed)
    )
    return make_pipeline(StandardScaler(), gp)


def product_features(X: np.ndarray, unused: np.ndarray | None = None) -> np.ndarray:
    """``launch_features`` plus, for every pair of parameters with more than two values (block and tile
    sizes), log2 of their product and its largest power-of-two divisor: threads per block (block_x x block_y)
    and work per thread (tile_x x tile_y) decide occupancy and warp alignment, which no single size shows.
    A product is 0 where either parameter is ``unused``."""
    X = np.asarray(X, dtype=float)
    base = launch_features(X, unused)
    multi = [j for j in range(X.shape[1]) if len(np.unique(X[:, j])) > 2 and X[:, j].min() > 0]
    cols = []
    for a in range(len(multi)):
        for b in range(a + 1, len(multi)):
            p = X[:, multi[a]] * X[:, multi[b]]
            if np.all(p == np.round(p)):
                pi = p.astype(np.int64)
                mine = [np.log2(p), np.log2((pi & -pi).astype(float))]
            else:
                mine = [np.log2(p)]
            if unused is not None:
                off = unused[:, multi[a]] | unused[:, multi[b]]
                mine = [np.where(off, 0.0, m) for m in mine]
            cols += mine
    return np.column_stack([base, *cols]) if cols else base
