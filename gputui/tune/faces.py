"""How a tune reads: a line per trial as it ends, the table of all trials, the verdict
in words, and the same as JSON (``gputui tune --json``)."""

from __future__ import annotations

from collections.abc import Sequence

from gputui.escape import for_terminal
from gputui.fmt import GIB, num, pct, per_second, rate
from gputui.lookback.noise import RatioInterval, rate_interval
from gputui.protocol import JsonObject
from gputui.tune.trial import Trial
from gputui.tune.verdict import Verdict, change_in_words, ratio

COLUMNS = ("#", "SETTING", "RATE", "95% INTERVAL", "DATA WAIT", "GPU BUSY", "CPU CORES", "RSS GB", "SHM GB", "")


def _interval_text(trial: Trial) -> str:
    known = rate_interval(trial.windows)
    if known is None or known[1] is None or known[2] is None:
        return "-"
    return f"{rate(known[1])}-{rate(known[2])}"


def _gb(value: int | None) -> str:
    return "-" if value is None else f"{value / GIB:.1f}"


def _pct(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.0f}%"


def trial_line(trial: Trial, total: int) -> str:
    """``trial 3 of at most 8, 8 workers: 1,234 samples/s, data wait 3%, GPU 97%, 7.5 cores``."""
    head = f"trial {trial.number} of at most {total}, {trial.settings.label()}"
    if trial.failure is not None:
        return for_terminal(f"{head}: failed: {trial.failure}")
    return (
        f"{head}: {rate(trial.rate)} {per_second(trial.unit)} over {trial.training_s:.0f} s of training, data wait {_pct(trial.data_wait)}"
        f", GPU busy {pct(trial.gpu_busy_pct)}, {num(trial.cpu_cores, digits=1)} cores"
    )


def table_rows(trials: Sequence[Trial], verdict: Verdict) -> list[list[str]]:
    """A row per trial under COLUMNS, plain text (the terminal's and the report's)."""
    rows = []
    for trial in trials:
        mark = "<- chosen" if trial is verdict.chosen else ("as written" if trial.number == 1 else "")
        if trial.failure is not None:
            rows.append([str(trial.number), trial.settings.label(), "failed", trial.failure[:60], "", "", "", "", "", mark])
            continue
        rows.append(
            [
                str(trial.number),
                trial.settings.label(),
                rate(trial.rate),
                _interval_text(trial),
                _pct(trial.data_wait),
                pct(trial.gpu_busy_pct),
                num(trial.cpu_cores, digits=1),
                _gb(trial.peak_rss),
                _gb(trial.shm_used),
                mark,
            ]
        )
    return rows


def rate_note(trials: Sequence[Trial]) -> str:
    unit = next((t.unit for t in trials if t.ok), "samples")
    return f"RATE in {per_second(unit)} of training (evaluation left out)"


def table(trials: Sequence[Trial], verdict: Verdict) -> str:
    rows = [list(COLUMNS), *([for_terminal(cell) for cell in row] for row in table_rows(trials, verdict))]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    text = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    return "\n".join([rate_note(trials), *text])


def gain_text(gain: RatioInterval | None) -> str:
    """``+38% (+33% to +44%)``."""
    if gain is None:
        return "-"
    text = f"{100 * (gain.ratio - 1):+.0f}%"
    if gain.low is not None and gain.high is not None:
        text += f" ({100 * (gain.low - 1):+.0f}% to {100 * (gain.high - 1):+.0f}%)"
    return text


def verdict_lines(verdict: Verdict, frameworks: Sequence[str]) -> list[str]:
    lines = [f"gputui tune: {verdict.headline}"]
    chosen = verdict.chosen
    if verdict.kind == "tuned" and chosen is not None:
        lines.append(f"  change: {change_in_words(chosen.settings, verdict.baseline.written, frameworks)}")
        lines.append(f"  expected gain over the script as written: {gain_text(verdict.gain)}")
    elif verdict.kind in ("cannot_feed", "waits_elsewhere"):
        if chosen is not None and chosen is not verdict.baseline:
            lines.append(f"  best it can do here: {change_in_words(chosen.settings, verdict.baseline.written, frameworks)}, {gain_text(verdict.gain)}")
        lines += [f"  - {remedy}" for remedy in verdict.remedies]
    return [for_terminal(line) for line in lines]


def _gain_json(gain: RatioInterval | None) -> JsonObject | None:
    return None if gain is None else {"ratio": gain.ratio, "low": gain.low, "high": gain.high}


def to_json(trials: Sequence[Trial], verdict: Verdict, frameworks: Sequence[str]) -> JsonObject:
    def trial_json(trial: Trial) -> JsonObject:
        known = rate_interval(trial.windows)
        over_written = ratio(trials[0], trial) if trial is not trials[0] and trial.ok and trials[0].ok else None
        return {
            "trial": trial.number,
            "asked": trial.asked.as_dict(),
            "settings": trial.settings.as_dict(),
            "label": trial.settings.label(),
            "rate": trial.rate,
            "rate_low": known[1] if known else None,
            "rate_high": known[2] if known else None,
            "unit": trial.unit,
            "windows": len(trial.windows),
            "workers_seen": trial.workers_seen,
            "training_s": round(trial.training_s, 3),
            "data_wait": trial.data_wait,
            "gpu_busy_pct": trial.gpu_busy_pct,
            "cpu_cores": trial.cpu_cores,
            "peak_rss_bytes": trial.peak_rss,
            "shm_used_bytes": trial.shm_used,
            "gain": _gain_json(over_written),  # over the script as written
            "failure": trial.failure,
            "recording": trial.recording,
            "loaders_left_alone": trial.left_alone or None,
        }

    return {
        "verdict": verdict.kind,
        "headline": verdict.headline,
        "chosen": verdict.chosen.number if verdict.chosen else None,
        "change": change_in_words(verdict.chosen.settings, verdict.baseline.written, frameworks) if verdict.chosen else None,
        "gain": _gain_json(verdict.gain),
        "cores": verdict.cores,
        "cores_needed": verdict.cores_needed,
        "remedies": verdict.remedies or None,
        "frameworks": list(frameworks),
        "trials": [trial_json(t) for t in trials],
    }
