"""TEST-ONLY stand-in for Hugging Face ``evaluate``, put first on PYTHONPATH by
tests/frameworks for the accelerate and Trainer examples.

The real ``evaluate.load("glue", "mrpc")`` / ``evaluate.load("accuracy")`` fetch the metric's
code from the Hub at run time, which these offline tests cannot.  This module gives the
same calls the examples make (``load``, ``add_batch``, ``compute``) and the same result
keys (accuracy, and f1 for GLUE MRPC), computed with numpy.  gputui reads none of it.
"""

from __future__ import annotations

import numpy as np

__version__ = "0.0.0+gputui-tests"


class _Metric:
    def __init__(self, name: str, config_name: str | None) -> None:
        self.name, self.config_name = name, config_name
        self._predictions: list[np.ndarray] = []
        self._references: list[np.ndarray] = []

    def add_batch(self, *, predictions, references) -> None:
        self._predictions.append(_as_array(predictions))
        self._references.append(_as_array(references))

    def compute(self, *, predictions=None, references=None) -> dict[str, float]:
        if predictions is not None:
            self.add_batch(predictions=predictions, references=references)
        pred = np.concatenate(self._predictions) if self._predictions else np.zeros(0)
        ref = np.concatenate(self._references) if self._references else np.zeros(0)
        self._predictions, self._references = [], []
        result = {"accuracy": float((pred == ref).mean()) if len(ref) else 0.0}
        if self.config_name in ("mrpc", "qqp"):
            tp = float(((pred == 1) & (ref == 1)).sum())
            fp = float(((pred == 1) & (ref == 0)).sum())
            fn = float(((pred == 0) & (ref == 1)).sum())
            result["f1"] = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
        return result


def _as_array(values) -> np.ndarray:
    """Values as one flat array; a torch tensor on any device is copied to the host first,
    as the real ``evaluate`` (through ``datasets``' features) does."""
    if hasattr(values, "detach"):
        values = values.detach().cpu().numpy()
    return np.asarray(values).reshape(-1)


def load(path: str, config_name: str | None = None, **kwargs) -> _Metric:
    return _Metric(path, config_name)
