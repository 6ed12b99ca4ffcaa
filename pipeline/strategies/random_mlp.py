"""The seed's recipe: random samples, the Table 2 MLP trained on them, then the model's best few re-measured.

The seed trains on raw run time (not log time) and we keep that, so this is its recipe and not an improved
one. A tenth of the budget (at least one measurement) checks the model's top predictions; the pick is the best
measured configuration, so the model can only help.

Batching: the random phase is one batch (``Session.settle`` before the fit), the model's ranking another.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..interrupts import check
from .base import Session
from .estimators import seed_mlp


def tune(session: Session) -> None:
    verify = max(1, session.budget // 10)
    session.measure_random(session.budget - verify)
    session.settle()  # the random phase is one batch: the model learns from all of it
    X, logy = session.training_data()
    finite = np.array([np.isfinite(session.measured[i]) for i in session.measured])
    if finite.sum() >= 2:
        model = seed_mlp(session.seed)
        # batch 200 as in Table 2; scikit-learn clips it to the sample count anyway, we just say so quietly
        model.set_params(mlpregressor__batch_size=min(200, int(finite.sum())))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X[finite], np.exp(logy[finite]))
        check()  # the MLP swallows Ctrl-C and returns half-trained: the interrupt goes on from here
        scores = model.predict(session.X)
        session.measure_ranked(scores, session.remaining)
    session.measure_random(session.remaining)
