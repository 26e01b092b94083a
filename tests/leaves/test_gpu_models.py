"""The datasheet lookup (gputui.gpus.models.find_model): asked on every sample by the
diagnosis, so the built-in datasheet's answer for a GPU is worked out once."""

from __future__ import annotations

from gputui.gpus import models
from gputui.gpus.models import GIB, find_model, load_models


def test_the_datasheet_s_answer_is_worked_out_once_per_gpu(monkeypatch):
    matched: list[str] = []
    real = models._match
    monkeypatch.setattr(models, "_match", lambda name, memory, entries: matched.append(name) or real(name, memory, entries))
    models._find_in_datasheet.cache_clear()
    first = find_model("NVIDIA H200", 141 * GIB)
    assert first is not None and first.model == "NVIDIA H200 SXM"
    assert find_model("NVIDIA H200", 141 * GIB) is first
    assert matched == ["NVIDIA H200"]
    # the same answer as matching the entries afresh, and other tables are matched each time
    assert find_model("NVIDIA H200", 141 * GIB, models=load_models()) == first
    assert find_model("NVIDIA H100 PCIe", None, models=load_models()).model == "NVIDIA H100 PCIe"
    assert matched == ["NVIDIA H200", "NVIDIA H200", "NVIDIA H100 PCIe"]
    assert find_model(None) is None and find_model("no such GPU") is None
