"""Idle cost: with a price per hour (``[diagnosis] price_per_hour``, a preset's own
diagnosis table, or ``--price``), the idle finding says what the idle time cost."""

from __future__ import annotations

import pytest

from gputui.cli.main import main
from gputui.diagnosis import Settings
from gputui.errors import UserError
from gputui.presets.preset import Config, Preset
from gputui.session.options import RunOptions
from tests.support.diagnosis_traces import findings, load, of_kind
from tests.support.records import with_preset


def test_the_idle_finding_prices_its_time():
    finding = of_kind(findings(load("idle_io"), Settings(price_per_hour=3.5)), "idle")
    evidence = finding["evidence"]
    hours = evidence["duration_s"] / 3600.0
    assert evidence["price_per_hour"] == 3.5
    assert evidence["idle_cost_usd"] == pytest.approx(hours * 3.5, abs=0.006)
    assert f"that cost ${evidence['idle_cost_usd']:.2f} at $3.50/hour" in finding["title"]


def test_without_a_price_the_idle_finding_names_no_cost():
    finding = of_kind(findings(load("idle_io")), "idle")
    assert "idle_cost_usd" not in finding["evidence"] and "$" not in finding["title"]


def test_a_price_the_preset_carries_is_used():
    rec = load("idle_io")
    with_preset(rec, price_per_hour=2.0)
    assert of_kind(findings(rec), "idle")["evidence"]["price_per_hour"] == 2.0


def test_the_command_line_price_wins_over_the_files(tmp_path):
    preset = Preset(name="p", source=tmp_path / "presets.toml", command=("true",), diagnosis={"price_per_hour": 1.0})
    files = Config(presets={}, diagnosis={"price_per_hour": 9.0})
    assert RunOptions(config=files, price_per_hour=4.0).session_config(preset).diagnosis.price_per_hour == 4.0
    assert RunOptions(config=files).session_config(preset).diagnosis.price_per_hour == 1.0
    assert RunOptions(config=files).session_config(None).diagnosis.price_per_hour == 9.0


def test_a_bad_price_is_a_one_line_user_error(tmp_path, capsys):
    code = main(["--headless", "--record", str(tmp_path / "r.jsonl"), "--duration", "1", "--price", "-2"])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err == "gputui: error: --price: expected a price per hour greater than 0, got -2.0"


def test_a_bad_price_in_a_diagnosis_table_names_the_key(tmp_path):
    from gputui.errors import UserError
    from gputui.presets.preset import load_diagnosis_file

    path = tmp_path / "presets.toml"
    path.write_text("[diagnosis]\nprice_per_hour = 0\n")
    with pytest.raises(UserError, match=r"\[diagnosis\]\.price_per_hour: expected a number greater than 0"):
        load_diagnosis_file(path)


def test_the_dashboard_takes_price_as_the_headless_recorder_does(tmp_path):
    from gputui.cli.run_options import check_price
    from gputui.view.supervisor import SessionSupervisor, SessionTicket

    assert check_price(None) is None
    with pytest.raises(UserError, match="--price: expected a price per hour greater than 0"):
        check_price(-1.0)
    # The command line wins over the files' table and over a preset's own table, as headless.
    preset = Preset(name="p", source=tmp_path / "p.toml", command=("true",), diagnosis={"price_per_hour": 1.0})
    supervisor = SessionSupervisor(
        lambda config: None,
        lambda session, ticket: [],
        options=RunOptions(
            config=Config(presets={}, diagnosis={"thermal_warn_c": 50, "price_per_hour": 0.5}),
            price_per_hour=check_price(2.5),
        ),
    )
    settings = supervisor._config(SessionTicket(serial=1, run=1, preset=preset)).diagnosis
    assert settings.price_per_hour == 2.5 and settings.thermal_warn_c == 50
