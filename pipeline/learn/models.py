"""Surrogate models (scikit-learn estimators) and their storage with skops and an explicit trust list.

Three models learn total time from launch parameters, compared on one split:

- ``mlp``: the CFD seed's Table 2 network (Adam, ReLU, alpha 1e-4, beta 0.95/0.90, lr 9e-4, 200 epochs, batch
  200, tol 1e-6, epsilon 1e-9) behind a StandardScaler. The seed omits the layer widths; ours are in the spec.
  The target is standardised too, because Adam on raw milliseconds converges slowly when times span 20x.
- ``gbr``: gradient-boosted trees, the strong off-the-shelf baseline for tabular data.
- ``additive``: one lookup table per kernel (its own parameters -> its median time) summed, plus the measured
  remainder. It is exact where kernels do not interact, costs nothing to train, and its optimum is found
  kernel by kernel (each kernel's small grid) instead of by sampling the 3.6e14 joint space.

Models are files read back by the report; pickle would run whatever a file's author put in it, so skops loads
only the types named in ``TRUSTED`` (plus skops' own safe defaults) and refuses a file with any other type.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, TransformerMixin
from sklearn.compose import TransformedTargetRegressor
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.neural_network import MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, StandardScaler

from launchtune.kernels.atomic import atomic_path

from ..errors import UserError
from ..jsonio import read_regular_bytes


def one_thread() -> Any:
    """Fit and predict with one BLAS/OpenMP thread: the same seed then gives the same numbers on any machine
    (a sum split over another number of threads rounds differently), and the MLP's small matrices gain
    nothing from threads on a shared 2-core machine (they spun against other processes: 14x slower there)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1)


class AdditiveKernelModel(RegressorMixin, BaseEstimator):
    """Total time = sum over kernels of a per-kernel table (median over samples sharing that kernel's
    parameters)
    + the median remainder (time outside the tuned kernels). Unseen parameter tuples take the mean of the
    ``neighbours`` nearest seen tuples in standardised parameter space.

    ``groups`` maps each kernel to the column indices of its parameters in X; ``kernel_times`` (fit only)
    holds
    the measured per-kernel times, one column per kernel in ``groups`` order.
    """

    def __init__(self, groups: dict[str, list[int]] | None = None, neighbours: int = 3):
        self.groups = groups
        self.neighbours = neighbours

    def fit(self, X: Any, y: Any, kernel_times: Any = None) -> AdditiveKernelModel:
        X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
        if kernel_times is None:
            raise ValueError("AdditiveKernelModel.fit needs kernel_times (one column per kernel)")
        kt = np.asarray(kernel_times, dtype=float)
        groups = self._groups()
        self.kernels_ = list(groups)
        self.keys_, self.values_, self.scale_ = {}, {}, {}
        for j, kernel in enumerate(self.kernels_):
            cols = groups[kernel]
            sub = X[:, cols]
            keys, inverse = np.unique(sub, axis=0, return_inverse=True)
            inverse = inverse.ravel()
            medians = np.array([np.median(kt[inverse == i, j]) for i in range(len(keys))])
            self.keys_[kernel] = keys
            self.values_[kernel] = medians
            scale = sub.std(axis=0)
            self.scale_[kernel] = np.where(scale > 0, scale, 1.0)
        self.rest_ = float(np.median(y - kt.sum(axis=1)))
        self.n_features_in_ = X.shape[1]
        return self

    def _groups(self) -> dict[str, list[int]]:
        """``groups``, which scikit-learn's convention lets default to None; the model cannot do without."""
        if self.groups is None:
            raise ValueError("AdditiveKernelModel needs groups (each kernel's parameter columns in X)")
        return self.groups

    def predict_kernel(self, kernel: str, sub: Any) -> np.ndarray:
        """Predicted time of one kernel for rows of its own parameters."""
        sub = np.atleast_2d(np.asarray(sub, dtype=float))
        keys, values, scale = self.keys_[kernel], self.values_[kernel], self.scale_[kernel]
        d = (((sub[:, None, :] - keys[None, :, :]) / scale) ** 2).sum(axis=2)
        k = min(self.neighbours, len(keys))
        exact = d.min(axis=1) == 0
        nearest = np.argsort(d, axis=1)[:, :k]
        out = values[nearest].mean(axis=1)
        out[exact] = values[d[exact].argmin(axis=1)]
        return out

    def predict(self, X: Any) -> np.ndarray:
        X = np.asarray(X, dtype=float)
        total = np.full(len(X), self.rest_)
        groups = self._groups()
        for kernel in self.kernels_:
            total += self.predict_kernel(kernel, X[:, groups[kernel]])
        return total

    def best_per_kernel(self, features: Sequence[str], values: dict[str, list[int]]) -> dict[str, int]:
        """The predicted optimum, kernel by kernel over each kernel's own value grid."""
        best: dict[str, int] = {}
        groups = self._groups()
        for kernel in self.kernels_:
            names = [features[i] for i in groups[kernel]]
            grids = np.meshgrid(*[values[n] for n in names], indexing="ij")
            grid = np.stack([g.ravel() for g in grids], axis=1)
            i = int(np.argmin(self.predict_kernel(kernel, grid)))
            best.update({n: int(grid[i, c]) for c, n in enumerate(names)})
        return best


def _log_target() -> FunctionTransformer:
    # np.log/np.exp are skops-trusted by default; check_inverse off: exp(log(y)) == y up to rounding anyway.
    return FunctionTransformer(np.log, np.exp, check_inverse=False)


def seed_mlp_regressor(
    hidden_layers: Sequence[int], max_epochs: int, seed: int, batch_size: int
) -> MLPRegressor:
    """The one builder of the CFD seed's network (Xue & Roy, Table 2): a ReLU MLP trained by Adam with the
    paper's rates and momenta. The sweep's surrogates and the strategies' ``random_mlp`` both start here."""
    return MLPRegressor(
        hidden_layer_sizes=tuple(hidden_layers),
        activation="relu",
        solver="adam",
        alpha=1e-4,
        beta_1=0.95,
        beta_2=0.90,
        learning_rate="adaptive",
        learning_rate_init=9e-4,
        max_iter=max_epochs,
        batch_size=batch_size,
        tol=1e-6,
        epsilon=1e-9,
        random_state=seed,
    )


def make_mlp(
    hidden_layers: Sequence[int], max_epochs: int, seed: int, n_train: int = 200, log_target: bool = False
) -> TransformedTargetRegressor:
    """The sweep's surrogate: StandardScaler, the seed's MLP, and a standardised (optionally log) target."""
    mlp = seed_mlp_regressor(hidden_layers, max_epochs, seed, batch_size=max(1, min(200, n_train)))
    # ``log_target``: learn log(time), for data whose classes differ by orders of magnitude (a CPU beside
    # GPUs); on milliseconds the standardised target would be all between-class gap and no within-class shape.
    target = make_pipeline(_log_target(), StandardScaler()) if log_target else StandardScaler()
    return TransformedTargetRegressor(regressor=make_pipeline(StandardScaler(), mlp), transformer=target)


def make_gbr(seed: int, log_target: bool = False) -> Any:
    # Early stopping on a 10% validation share: stops in tens of rounds on small sweeps, runs longer on big
    # ones.
    gbr = HistGradientBoostingRegressor(
        max_iter=300, learning_rate=0.1, early_stopping=True, random_state=seed
    )
    return TransformedTargetRegressor(regressor=gbr, transformer=_log_target()) if log_target else gbr


def loss_curve(model: Any) -> list[float]:
    """The MLP's training loss per epoch (empty for models that have none)."""
    if isinstance(model, TransformedTargetRegressor):
        inner = model.regressor_
        return [float(v) for v in getattr(inner[-1] if hasattr(inner, "steps") else inner, "loss_curve_", [])]
    return []


def held_out_curve(
    model: Any, X_train: np.ndarray, y_train: np.ndarray, X_test: np.ndarray, y_test: np.ndarray
) -> tuple[list[float], list[float]]:
    """The MLP's training loss and its loss on held-out rows after each epoch, in the units of scikit-learn's
    ``loss_curve_`` (squared error / 2 of the standardised target; the training loss also holds the small L2
    term, alpha 1e-4); empty for models without a loss curve.

    scikit-learn records the training loss only (a validation score only with ``early_stopping``, which
    would take rows out of training and change the model), so the fit is replayed epoch by epoch on a copy of
    the network, ``partial_fit`` on the fitted model's own scaled data, with one random stream for the
    initial weights and every epoch's shuffle as ``fit`` draws them, stopping where ``fit`` stops. The first
    list is the replay's training loss: equal to the model's ``loss_curve_`` where the replay is faithful.
    """
    from sklearn.base import clone

    if not isinstance(model, TransformedTargetRegressor) or not hasattr(model.regressor_, "steps"):
        return [], []
    inner = model.regressor_
    if not isinstance(inner[-1], MLPRegressor):
        return [], []
    front, fitted = inner[:-1], inner[-1]

    def target(y: np.ndarray) -> np.ndarray:
        return np.asarray(model.transformer_.transform(np.asarray(y, float).reshape(-1, 1))).ravel()

    xs_train, xs_test = front.transform(X_train), front.transform(X_test)
    ys_train, ys_test = target(y_train), target(y_test)
    seed = fitted.random_state if isinstance(fitted.random_state, int) else None
    stream = np.random.RandomState(seed)
    mlp = clone(fitted).set_params(random_state=stream)
    n_weights = sum(c.size for c in fitted.coefs_) + sum(b.size for b in fitted.intercepts_)
    # fit shuffles its previous epoch's order, partial_fit a fresh arange: hand each epoch the rows in fit's
    # order of the epoch before, and follow the permutation it draws (sklearn.utils.shuffle: one
    # RandomState.shuffle of an arange, after the initial weights' uniform draws on the first epoch).
    order = np.arange(len(ys_train))
    held_out: list[float] = []
    with one_thread():
        for epoch in range(fitted.max_iter):
            mirror = np.random.RandomState()
            mirror.set_state(stream.get_state())
            mlp.partial_fit(xs_train[order], ys_train[order])
            if epoch == 0:
                mirror.random_sample(n_weights)
            drawn = np.arange(len(order))
            mirror.shuffle(drawn)
            order = order[drawn]
            held_out.append(float(0.5 * np.mean((ys_test - mlp.predict(xs_test)) ** 2)))
            if mlp._no_improvement_count > mlp.n_iter_no_change:  # where fit stops (adam, no early_stopping)
                break
    return [float(v) for v in mlp.loss_curve_], held_out


class ZeroInactive(TransformerMixin, BaseEstimator):
    """Sets to 0 the feature columns a configuration does not use (``kernels.space.Inactive`` rules: the fused
    CFD levels ignore the seven kernels' launches, the seven kernels ignore the tile): their values there are
    noise that trees split on. ``rules`` are ``[column that decides, its values, columns unused there]``.
    Written here because no scikit-learn transformer zeroes cells conditionally on another column."""

    def __init__(self, features: Sequence[str] = (), rules: Sequence[Sequence[Any]] = ()):
        self.features = features
        self.rules = rules

    def fit(self, X: Any, y: Any = None) -> ZeroInactive:
        return self

    def transform(self, X: Any) -> np.ndarray:
        out = np.array(X, dtype=float, copy=True)
        index = {f: i for i, f in enumerate(self.features)}
        for when, values, params in self.rules:
            if when in index:
                rows = np.isin(out[:, index[when]], np.asarray(values, dtype=float))
                cols = np.array([index[p] for p in params if p in index], dtype=np.intp)
                out[np.ix_(rows, cols)] = 0.0
        return out


def with_inactive_zeroed(model: Any, features: Sequence[str], rules: Sequence[Sequence[Any]]) -> Any:
    """``model`` behind a ``ZeroInactive`` step (unchanged where there are no rules); the target transform,
    where there is one, stays outermost so the MLP's loss curve is found where ``loss_curve`` looks."""
    if not rules:
        return model
    zero = ZeroInactive(list(features), [list(r) for r in rules])

    def behind(m: Any) -> Any:  # one flat pipeline, so its last step is still the regressor
        return (
            make_pipeline(zero, *(step for _, step in m.steps))
            if hasattr(m, "steps")
            else make_pipeline(zero, m)
        )

    if isinstance(model, TransformedTargetRegressor):
        model.regressor = behind(model.regressor)
        return model
    return behind(model)


# Beyond skops' default-trusted scikit-learn and numpy types, exactly these may appear in our model files.
TRUSTED = [
    "launchtune.pipeline.learn.models.AdditiveKernelModel",
    "launchtune.pipeline.learn.models.ZeroInactive",
    "sklearn.ensemble._hist_gradient_boosting.predictor.TreePredictor",
    "sklearn.neural_network._stochastic_optimizers.AdamOptimizer",
]


def save_model(model: Any, path: Path) -> None:

    import skops.io as sio  # here, not at the top: the fit workers import this module and never save

    with atomic_path(path) as tmp:  # an interrupted dump leaves no model behind
        sio.dump(model, tmp)


def load_model(path: Path) -> Any:
    """Load a skops model file, refusing any type outside ``TRUSTED`` (never a pickle)."""

    import skops.io as sio

    if not path.exists():
        raise UserError(f"{path}: no such model file (run `launchtune train` first)")
    data = read_regular_bytes(path, "model")  # a FIFO or a device there is one line, never a hang
    assert data is not None
    try:
        untrusted = sio.get_untrusted_types(data=data)
    except Exception as exc:
        raise UserError(f"{path}: not a readable skops model file ({exc})") from None
    refused = [t for t in untrusted if t not in TRUSTED]
    if refused:
        raise UserError(f"{path}: refused to load a model file with untrusted types: {', '.join(refused)}")
    return sio.loads(data, trusted=[t for t in untrusted if t in TRUSTED])
