"""A tune as a report (``gputui tune --report FILE.md|.html``): the verdict, the table of
trials and one plot, throughput against workers with each trial's interval."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

from gputui.escape import for_plot
from gputui.fmt import per_second
from gputui.lookback.document import Block, Bullets, Code, Heading, Image, Paragraph, Table, to_html, to_markdown
from gputui.lookback.noise import rate_interval
from gputui.record.redact import redact_argv
from gputui.safe_write import write_atomic, write_atomic_with
from gputui.tune.faces import COLUMNS, rate_note, table_rows, verdict_lines
from gputui.tune.trial import Trial
from gputui.tune.verdict import Verdict

WIDTH_IN, HEIGHT_IN, DPI = 7.0, 4.0, 100
CHOSEN_COLOUR, OTHER_COLOUR, WRITTEN_COLOUR = "#d62728", "#1f77b4", "#7f7f7f"


def plot_workers(trials: Sequence[Trial], verdict: Verdict, path: Path) -> bool:
    """Throughput against workers, each trial with its 95 % interval; False when no
    trial measured a rate."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    measured = [t for t in trials if t.ok and t.rate is not None]
    if not measured:
        return False
    figure = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    ax = figure.add_subplot()
    ax.set_title("gputui tune: throughput against DataLoader workers")
    ax.set_xlabel("num_workers")
    ax.set_ylabel(for_plot(per_second(measured[0].unit)))
    ax.grid(True, alpha=0.3)
    for trial in measured:
        known = rate_interval(trial.windows)
        rate = trial.rate or 0.0
        low, high = (known[1], known[2]) if known and known[1] is not None and known[2] is not None else (rate, rate)
        colour = CHOSEN_COLOUR if trial is verdict.chosen else WRITTEN_COLOUR if trial.number == 1 else OTHER_COLOUR
        x = trial.settings.num_workers or 0
        ax.errorbar([x], [rate], yerr=[[rate - low], [high - rate]], fmt="o", color=colour, capsize=4)
        ax.annotate(for_plot(f"{trial.number}: {trial.settings.label()}"), (x, rate), textcoords="offset points", xytext=(6, 4), fontsize="small")
    ax.set_ylim(bottom=0)
    ax.margins(x=0.2)  # room for the labels beside the outermost points
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for colour, label in ((CHOSEN_COLOUR, "chosen"), (WRITTEN_COLOUR, "as written"), (OTHER_COLOUR, "tried")):
        ax.plot([], [], "o", color=colour, label=label)
    ax.legend(loc="lower right", fontsize="small")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    write_atomic_with(path, lambda handle: handle.write(buffer.getvalue()), binary=True, private=True)
    return True


def report_blocks(trials: Sequence[Trial], verdict: Verdict, frameworks: Sequence[str], command: Sequence[str], image: str | None) -> list[Block]:
    blocks: list[Block] = [
        Heading(1, "gputui tune"),
        Paragraph(("Command: ", Code(" ".join(redact_argv(list(command)))))),
        Paragraph(verdict_lines(verdict, frameworks)[0].removeprefix("gputui tune: ")),
    ]
    details = [line.strip().removeprefix("- ") for line in verdict_lines(verdict, frameworks)[1:]]
    if details:
        blocks.append(Bullets(details))
    blocks += [Heading(2, "Trials"), Paragraph(rate_note(trials)), Table(list(COLUMNS), table_rows(trials, verdict))]
    if image is not None:
        blocks.append(Image(image, "throughput against DataLoader workers, each trial with its 95% interval"))
    return blocks


def write_report(path: Path, trials: Sequence[Trial], verdict: Verdict, frameworks: Sequence[str], command: Sequence[str]) -> None:
    """``path``: .md with the plot as a PNG beside it, or .html with the plot inside;
    readable by its owner alone, as the trials' recordings are (it names the command)."""
    image_path = path.with_suffix(".png")
    image = image_path.name if plot_workers(trials, verdict, image_path) else None
    blocks = report_blocks(trials, verdict, frameworks, command, image)
    if path.suffix == ".html":
        write_atomic(path, to_html(blocks, "gputui tune", path.parent), private=True)
        if image is not None:
            image_path.unlink(missing_ok=True)  # inside the page now
    else:
        write_atomic(path, to_markdown(blocks), private=True)
