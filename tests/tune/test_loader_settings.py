"""The probe puts a tune trial's settings into the script's training DataLoaders, built
with torch's real ``torch.utils.data.DataLoader`` in a child, and leaves what a batch
holds alone: evaluation loaders (no shuffling) and IterableDataset loaders keep the
script's settings, and each loader built is told to gputui."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from gputui.tune.settings import ENV, LoaderSettings
from tests.probe.test_probe import run_probed, statuses

SCRIPT = textwrap.dedent(
    """
    import json, sys
    import torch
    from torch.utils.data import DataLoader, IterableDataset, RandomSampler, TensorDataset

    class Stream(IterableDataset):
        def __iter__(self):
            yield from range(8)

    data = TensorDataset(torch.arange(64).float().unsqueeze(1), torch.zeros(64))
    train = DataLoader(data, batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(0))
    by_sampler = DataLoader(data, 8, sampler=RandomSampler(data, generator=torch.Generator().manual_seed(1)))
    positional = DataLoader(data, 8, True, None, None, 0)  # torch's own positional order
    evaluation = DataLoader(data, batch_size=16)
    stream = DataLoader(Stream(), batch_size=2)
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    order = []
    for x, y in train:
        order.append(x.squeeze(1).tolist())
        model(x).sum().backward()
        optimizer.step()
    loaders = {"train": train, "by_sampler": by_sampler, "positional": positional, "evaluation": evaluation, "stream": stream}
    print(json.dumps({
        "order": order,
        "loaders": {k: [v.num_workers, v.pin_memory, v.persistent_workers, v.prefetch_factor] for k, v in loaders.items()},
    }))
    """
)


@pytest.fixture(scope="module")
def script(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("loaders") / "loaders.py"
    path.write_text(SCRIPT)
    return path


def run(script: Path, settings: str | None) -> tuple[dict, list[dict]]:
    result, payloads = run_probed([sys.executable, str(script)], {ENV: settings} if settings is not None else None)
    assert result.returncode == 0, result.stderr.decode()[-2000:]
    told = [s for s in statuses(payloads) if s["state"] == "loader"]
    return json.loads(result.stdout.decode().strip().splitlines()[-1]), told


@pytest.fixture(scope="module")
def as_written(script):
    return run(script, None)


@pytest.fixture(scope="module")
def tuned(script):
    return run(script, LoaderSettings(num_workers=2, persistent_workers=True, prefetch_factor=3).env())


def test_training_loaders_are_built_with_the_trials_settings(tuned):
    built, _ = tuned
    for name in ("train", "by_sampler", "positional"):
        assert built["loaders"][name] == [2, False, True, 3], name


def test_evaluation_and_iterable_loaders_keep_the_scripts_settings(tuned, as_written):
    built, _ = tuned
    assert built["loaders"]["evaluation"] == as_written[0]["loaders"]["evaluation"] == [0, False, False, None]
    assert built["loaders"]["stream"] == [0, False, False, None]


def test_the_batches_hold_what_they_held_in_the_same_order(tuned, as_written):
    # the same seeded shuffle: workers fetch in the sampler's order, and torch keeps it
    assert tuned[0]["order"] == as_written[0]["order"]
    assert len(tuned[0]["order"]) == 8


def test_each_loader_built_is_told_with_what_it_had_what_it_got_or_why_not(tuned):
    _, told = tuned
    assert [t["training"] for t in told] == [True, True, True, False, False]
    first = told[0]
    assert LoaderSettings.from_fields(first["had"]) == LoaderSettings(0, False, False, None)
    assert LoaderSettings.from_fields(first["got"]) == LoaderSettings(2, False, True, 3)
    assert told[3]["why"] == "does not shuffle: taken for evaluation"
    assert told[4]["why"].startswith("an IterableDataset")
    assert all(isinstance(t["cpus"], int) and t["cpus"] >= 1 for t in told)
    assert "got" not in told[3]


def test_an_empty_setting_changes_nothing_and_tells_what_the_script_wrote(script, as_written):
    built, told = run(script, "{}")
    assert built == as_written[0]
    assert LoaderSettings.from_fields(told[0]["got"]) == LoaderSettings.from_fields(told[0]["had"]) == LoaderSettings(0, False, False, None)


def test_without_workers_the_settings_torch_refuses_are_left_out(script):
    built, _ = run(script, LoaderSettings(num_workers=0, persistent_workers=True, prefetch_factor=4).env())
    assert built["loaders"]["train"] == [0, False, False, None]


@pytest.mark.parametrize(
    "settings, error",
    [
        ("[1, 2]", "not a JSON object"),
        ('{"num_workers": -1}', "num_workers must be int"),
        ('{"batch_size": 4}', "unknown setting 'batch_size'"),
        ("{", "not JSON"),
    ],
)
def test_bad_settings_are_told_and_the_script_runs_as_written(script, as_written, settings, error):
    built, told = run(script, settings)
    assert built["loaders"] == as_written[0]["loaders"]
    assert len(told) == 1 and error in told[0]["error"]
