"""The framework-agnostic measurement loop, with a fake device and a fake clock."""

from __future__ import annotations

import io
import math

import pytest

from gputui import protocol
from gputui.protocol import Emitter
from gputui.workloads.measure import MissingFramework, Window, WorkloadOutOfMemory, emit_result, measure, pip_install, tf_metal_summary


class FakeDevice:
    """A device on a fake clock.  ``step()`` costs the host ``launch`` seconds and
    queues ``durations[i]`` seconds of device work.  Blocking (like the CPU) the host
    waits for each step; asynchronous (like CUDA) it runs ahead until ``depth`` steps
    are queued.  ``sync()`` moves the host clock to the moment the device is idle."""

    def __init__(self, durations, launch: float = 0.0, blocking: bool = True, depth: int = 8) -> None:
        self.durations = list(durations)
        self.launch = launch
        self.blocking = blocking
        self.depth = depth
        self.now = 0.0
        self.busy_until = 0.0
        self.finish: list[float] = []
        self.calls = 0
        self.syncs = 0

    def clock(self) -> float:
        return self.now

    def step(self) -> None:
        work = self.durations[self.calls]
        self.calls += 1
        if len(self.finish) >= self.depth:  # the launch queue is full: wait for a slot
            self.now = max(self.now, self.finish[-self.depth])
        self.now += self.launch
        self.busy_until = max(self.busy_until, self.now) + work
        self.finish.append(self.busy_until)
        if self.blocking:
            self.now = self.busy_until

    def sync(self) -> None:
        self.syncs += 1
        self.now = max(self.now, self.busy_until)


def run(device: FakeDevice, **kwargs):
    stream = io.StringIO()
    result = measure(device.step, device.sync, emitter=Emitter(stream), clock=device.clock, **kwargs)
    lines = [protocol.decode(line) for line in stream.getvalue().splitlines()]
    assert all(line is not None for line in lines)
    return result, lines


def steps_of(lines, phase=None):
    return [ln for ln in lines if ln["event"] == "step" and (phase is None or ln["phase"] == phase)]


def test_windows_group_steps_until_the_window_time_has_passed():
    # 0.03 s per step, 0.1 s windows: 4 steps (0.12 s) per window, the rest at the end.
    device = FakeDevice([0.03] * 12)
    result, lines = run(device, batch_size=8, warmup_steps=2, steps=10, window_s=0.1)
    measured = steps_of(lines, protocol.MEASURE)
    assert [ln["steps"] for ln in measured] == [4, 4, 2]
    assert [ln["samples"] for ln in measured] == [32, 32, 16]
    assert [ln["seconds"] for ln in measured] == pytest.approx([0.12, 0.12, 0.06])
    assert [ln["step"] for ln in measured] == [6, 10, 12]  # step index counts the warm-up too
    assert device.calls == 12
    assert result["steps"] == 10 and result["windows"] == 3
    assert result["samples"] == 80 and result["seconds"] == pytest.approx(0.30)
    assert result["samples_per_sec"] == pytest.approx(8 / 0.03)
    assert lines[-1]["event"] == "result" and lines[-1]["samples_per_sec"] == result["samples_per_sec"]


def test_warmup_is_excluded_from_the_result():
    # A 5 s first step (compilation) and a slow second one, then steady 0.05 s steps.
    device = FakeDevice([5.0, 1.0] + [0.05] * 6)
    result, lines = run(device, batch_size=10, warmup_steps=2, steps=6, window_s=0.0)
    warm = steps_of(lines, protocol.WARMUP)
    assert [ln["seconds"] for ln in warm] == pytest.approx([5.0, 1.0])
    assert len(steps_of(lines, protocol.MEASURE)) == 6
    assert result["samples_per_sec"] == pytest.approx(200.0)
    assert result["mean"] == pytest.approx(200.0)
    assert result["seconds"] == pytest.approx(0.30)


def test_median_p5_p95_and_mean_of_the_window_rates():
    # One window per step (window_s=0): rates 100, 50, 25, 100, 100 samples/s.
    device = FakeDevice([0.1, 0.2, 0.4, 0.1, 0.1])
    result, _ = run(device, batch_size=10, warmup_steps=0, steps=5, window_s=0.0)
    assert result["samples_per_sec"] == pytest.approx(100.0)  # median of the window rates
    assert result["p5"] == pytest.approx(30.0)  # 25 + 0.2 * (50 - 25), linear interpolation
    assert result["p95"] == pytest.approx(100.0)
    assert result["mean"] == pytest.approx(50 / 0.9)  # total samples / total time
    assert result["statistic"] == "median of window rates"


def test_asynchronous_steps_are_timed_by_the_device_not_by_the_launches():
    # Launching costs 1 ms, the device needs 50 ms per step: without the sync at each
    # window end the host would believe 1000 steps/s.
    device = FakeDevice([0.05] * 40, launch=0.001, blocking=False)
    result, lines = run(device, batch_size=4, warmup_steps=0, steps=40, window_s=0.1)
    assert result["samples_per_sec"] == pytest.approx(4 / 0.05, rel=0.05)
    assert result["mean"] == pytest.approx(160 / (40 * 0.05), rel=0.01)
    measured = steps_of(lines, protocol.MEASURE)
    assert sum(ln["steps"] for ln in measured) == 40
    assert sum(ln["seconds"] for ln in measured) == pytest.approx(result["seconds"])


def test_fast_steps_give_about_ten_lines_per_second():
    device = FakeDevice([0.001] * 2000)
    result, lines = run(device, batch_size=1, warmup_steps=0, steps=2000, window_s=0.1)
    measured = steps_of(lines, protocol.MEASURE)
    assert len(measured) == 20  # 2 s of steps
    assert device.syncs <= len(measured) + 2
    assert result["samples_per_sec"] == pytest.approx(1000.0)


def test_mark_is_called_after_the_sync_at_every_measured_boundary():
    device = FakeDevice([0.07] * 9)
    marks = []
    result, lines = run(device, batch_size=2, warmup_steps=3, steps=6, window_s=0.1, mark=lambda: marks.append(device.now))
    measured = steps_of(lines, protocol.MEASURE)
    assert len(marks) == len(measured) + 1
    assert marks[0] == pytest.approx(3 * 0.07)  # after warm-up
    spans = [b - a for a, b in zip(marks, marks[1:])]
    assert spans == pytest.approx([ln["seconds"] for ln in measured])


def test_result_carries_flops_memory_and_info():
    device = FakeDevice([0.01] * 4)
    result, lines = run(
        device, batch_size=5, warmup_steps=1, steps=3, window_s=0.0, flops_per_sample=2e9,
        peak_memory=lambda: 123_456, info={"framework": "fake", "model": "m", "precision": "bf16"},
    )  # fmt: skip
    assert result["mean"] == pytest.approx(500.0)
    assert result["flops_per_sample"] == 2e9
    assert result["achieved_tflops"] == pytest.approx(2e9 * 500.0 / 1e12)
    assert result["peak_memory_bytes"] == 123_456
    assert (result["framework"], result["model"], result["precision"]) == ("fake", "m", "bf16")
    assert lines[-1] == {"event": "result", **result}


def test_tf_metal_method_is_batch_times_steps_times_epochs_over_elapsed():
    # train_benchmark.py: a warm-up epoch of `steps` batches (slow first batch), then
    # 3 timed epochs; 30 steps of 10 ms, batch 32: 32*30*3 / 0.9 s = 3200 samples/s.
    device = FakeDevice([2.0] + [0.01] * 29 + [0.01] * 90)
    result, lines = run(device, batch_size=32, warmup_steps=7, steps=30, method="tf-metal", epochs=3)
    assert device.calls == 120  # warmup_steps is not used: the warm-up is one epoch
    assert result["samples_per_sec"] == pytest.approx(32 * 30 * 3 / 0.9)
    assert result["mean"] == pytest.approx(result["samples_per_sec"])
    assert result["epochs"] == 3 and result["steps"] == 90
    warm, measured = steps_of(lines, protocol.WARMUP), steps_of(lines, protocol.MEASURE)
    assert len(warm) == 1 and warm[0]["epoch"] == 0 and warm[0]["seconds"] == pytest.approx(2.29)
    assert [ln["epoch"] for ln in measured] == [1, 2, 3]
    assert all(ln["samples"] == 960 and ln["seconds"] == pytest.approx(0.3) for ln in measured)


def test_tf_metal_uneven_epochs():
    device = FakeDevice([0.1] * 4 + [0.1] * 4 + [0.2] * 4 + [0.3] * 4)
    result, lines = run(device, batch_size=2, warmup_steps=0, steps=4, method="tf-metal", epochs=3)
    assert result["samples_per_sec"] == pytest.approx(2 * 4 * 3 / (0.4 + 0.8 + 1.2))
    rates = sorted(ln["samples"] / ln["seconds"] for ln in steps_of(lines, protocol.MEASURE))
    assert rates == pytest.approx([8 / 1.2, 8 / 0.8, 8 / 0.4])
    assert result["p5"] == pytest.approx(8 / 1.2 + 0.1 * (8 / 0.8 - 8 / 1.2))


def test_no_measured_steps_is_an_error():
    with pytest.raises(ValueError):
        run(FakeDevice([]), batch_size=1, warmup_steps=0, steps=0)


def test_a_zero_length_window_does_not_break_the_json():
    device = FakeDevice([0.0, 0.0])
    result, lines = run(device, batch_size=1, warmup_steps=0, steps=2, window_s=0.0)
    assert "samples_per_sec" not in result or math.isfinite(result["samples_per_sec"])
    assert lines[-1]["event"] == "result"


def test_missing_framework_messages():
    plain = MissingFramework("torchvision", "torch", ModuleNotFoundError("No module named 'torchvision'", name="torchvision"))
    assert str(plain) == (
        "the package 'torchvision' is not installed; install it with: pip install 'torchvision>=0.16'"
        " (or all of the torch stack: pip install -e '.[torch]' in gputui's source folder)"
    )
    try:
        try:
            raise RuntimeError("operator torchvision::nms does not exist\nmore")
        except RuntimeError as inner:
            raise ModuleNotFoundError("Could not import module 'X'") from inner
    except ModuleNotFoundError as outer:
        broken = MissingFramework("transformers", "torch", outer)
    text = str(broken)
    assert "'transformers' cannot be imported" in text and "operator torchvision::nms does not exist" in text
    assert "\n" not in text and text.endswith("pip install -e '.[torch]' in gputui's source folder)")


def test_out_of_memory_fields():
    oom = WorkloadOutOfMemory("CUDA out of memory. Tried to allocate 2.00 GiB", batch_size=512, peak_memory_bytes=7)
    assert oom.fields == {"message": "CUDA out of memory. Tried to allocate 2.00 GiB", "batch_size": 512, "peak_memory_bytes": 7}


def test_json_safe_turns_every_non_finite_number_into_none_at_any_depth():
    value = {"a": math.inf, "b": [1.0, math.nan, {"c": -math.inf, "d": 2}], "e": "x"}
    assert protocol.json_safe(value) == {"a": None, "b": [1.0, None, {"c": None, "d": 2}], "e": "x"}


def test_emit_result_writes_one_line_without_unknown_or_non_finite_values():
    stream = io.StringIO()
    result = emit_result(
        Emitter(stream),
        {"samples_per_sec": math.inf, "p5": None, "mean": 3.0},
        method="tf-metal",
        info={"framework": "tf", "model": "resnet50"},
        peak_memory=lambda: None,
    )
    line = protocol.decode(stream.getvalue())
    assert result == {"framework": "tf", "model": "resnet50", "mean": 3.0, "method": "tf-metal"}
    assert line == {"event": "result", **result}


def test_the_tf_metal_numbers_come_from_one_function_for_every_framework():
    # measure(method="tf-metal") (torch) and the Keras workload both end in
    # tf_metal_summary + emit_result: the same windows give the same result line.
    device = FakeDevice([0.1] * 4 + [0.1] * 4 + [0.2] * 4 + [0.3] * 4)
    result, lines = run(device, batch_size=2, warmup_steps=0, steps=4, method="tf-metal", epochs=3, info={"framework": "torch"}, peak_memory=lambda: 123)
    windows = [Window(ln["phase"], ln["step"], ln["steps"], ln["samples"], ln["seconds"]) for ln in steps_of(lines, protocol.MEASURE)]
    stream = io.StringIO()
    again = emit_result(
        Emitter(stream),
        tf_metal_summary(windows, sum(w.seconds for w in windows), batch_size=2, steps=4, epochs=3),
        method="tf-metal",
        info={"framework": "torch"},
        peak_memory=lambda: 123,
    )
    assert again == pytest.approx(result)
    assert protocol.decode(stream.getvalue()) == lines[-1]


def test_the_tf_workload_keeps_no_copies_of_the_measurement_helpers():
    from gputui.workloads import tf_workload  # importable without TensorFlow: it loads inside the run

    own = {name for name, value in vars(tf_workload).items() if callable(value) and getattr(value, "__module__", "") == tf_workload.__name__}
    assert not own & {"_emit", "_finite", "_emit_window", "_summarize"}
    assert tf_workload.emit_result is emit_result and tf_workload.tf_metal_summary is tf_metal_summary


def test_the_torch_and_keras_result_lines_drop_non_finite_numbers_alike():
    # A clock too coarse to see the steps: every window lasts 0 s, so every rate is
    # infinite (and the percentiles between infinities NaN).  The torch worker's lines
    # (measure, both methods) and the Keras worker's tf-metal line (tf_metal_summary +
    # emit_result, as tf_workload.run ends) leave out the same non-finite numbers and
    # keep the same keys; no line carries NaN or infinity (JSON has neither).
    common = dict(batch_size=2, flops_per_sample=1e9, info={"framework": "torch", "model": "resnet50"}, peak_memory=lambda: 7)
    torch_tf_metal, lines = run(FakeDevice([0.0] * 8), warmup_steps=0, steps=2, method="tf-metal", epochs=3, **common)
    torch_steps, _ = run(FakeDevice([0.0] * 4), warmup_steps=1, steps=3, method="steps", **common)
    windows = [Window(ln["phase"], ln["step"], ln["steps"], ln["samples"], ln["seconds"]) for ln in steps_of(lines, protocol.MEASURE)]
    assert [w.rate for w in windows] == [math.inf] * 3
    stream = io.StringIO()
    keras_tf_metal = emit_result(
        Emitter(stream),
        tf_metal_summary(windows, 0.0, batch_size=2, steps=2, epochs=3, flops_per_sample=1e9),
        method="tf-metal",
        info={"framework": "torch", "model": "resnet50"},
        peak_memory=lambda: 7,
    )
    assert protocol.decode(stream.getvalue()) == {"event": "result", **keras_tf_metal} == lines[-1]
    assert keras_tf_metal == torch_tf_metal
    non_finite = {"samples_per_sec", "p5", "p95", "mean", "achieved_tflops"}
    for result in (torch_steps, torch_tf_metal, keras_tf_metal):
        assert not non_finite & set(result)
        assert all(math.isfinite(v) for v in result.values() if isinstance(v, float))
        assert result["flops_per_sample"] == 1e9 and result["peak_memory_bytes"] == 7
    assert set(torch_steps) == set(keras_tf_metal) - {"epochs"}


def test_install_advice_names_the_package_as_the_extra_pins_it_and_never_gputui():
    assert pip_install("transformers", "tf") == "pip install 'transformers<5,>=4.40'"  # the tf extra's pin
    assert pip_install("tf-keras", "tf").startswith("pip install 'tf-keras")
    assert pip_install("not-a-dependency", "torch") == "pip install not-a-dependency"
