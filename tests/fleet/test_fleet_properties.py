"""Properties of the fleet over anything its nodes may send (Hypothesis): any node
names, GPU names and values never crash the report, never let a node disappear from
it or hide a bad one behind an all-clear, never reach a median unless they are finite
speeds, and never put a raw control character in what is printed; the fleet check's
own lines, its reading of a node's output, its result files and its hostfile reader
hold the same."""

from __future__ import annotations

import json
import math
import statistics
import tempfile
import warnings
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gputui.errors import UserError
from gputui.fleet.node import MAX_NAME, split_output
from gputui.fleet.peers import BAD_INPUT, MAX_MEASURED, load_report
from gputui.fleet.report_files import blocks, plot, skipped_lines, terminal_lines, to_json
from gputui.fleet.results import HEALTHY, NodeResult, ResultFolder, node_result
from gputui.fleet.ssh import read_hostfile
from gputui.fmt import UNSAFE, printable
from gputui.lookback.document import to_markdown

PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

CONTROLS = ["\x1b]0;PWNED\x07", "\x1b[2J", "\x00", "\r", "\n", "\u202e", "\x9b", "\u2028"]
MATH = ["$", "$\\x$", "\\", "$$", "^", "_", "{", "}"]
pieces = st.one_of(st.text(max_size=12), st.sampled_from(CONTROLS), st.sampled_from(MATH), st.sampled_from(["ubuntu", "gpu 1", "gpu_1", "GPU_1"]))
names = st.lists(pieces, min_size=1, max_size=5).map("".join)
values = st.one_of(
    st.floats(min_value=1.0, max_value=5000.0),  # a speed
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**30), max_value=10**400),
    st.sampled_from([0, -1.0, 1e12, 1e12 + 1e-3, 1e300, True, "fast", None]),
)


def a_check(gpu_name: str, speeds: list, verdict: str) -> dict:
    gpus = len(speeds)
    checks = [{"id": f"micro.gpu{i}.matmul_bf16", "status": "ok", "value": v, "unit": "TFLOP/s", "gpu": i} for i, v in enumerate(speeds)]
    checks.append({"id": "host.shm", "status": verdict, "value": 64, "unit": "MiB"})
    return {
        "header": {"gpus": [{"index": i, "name": gpu_name} for i in range(gpus)]},
        "verdict": {"verdict": verdict, "counts": {verdict: 1}},
        "checks": checks,
    }


def finite_speed(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= MAX_MEASURED


nodes = st.lists(
    st.tuples(names, names, st.lists(values, min_size=1, max_size=3), st.sampled_from(["ok", "warn", "fail", "unreachable"])), min_size=1, max_size=5
)


def clean(text: str) -> bool:
    return not UNSAFE.search(text)


@PROPERTY
@given(nodes)
@example([("n\x1b]0;x\x07", "H$\\x$", [float("nan")], "ok"), ("n\x1b]0;x\x07", "H$\\x$", [1.0], "ok")])
@example([("ubuntu", "H200", [700.0, 710.0], "fail"), ("ubuntu", "H200", [700.0, 1e400], "ok"), ("b", "H200", [10**400], "ok")])
def test_any_fleet_reads_every_node_keeps_bad_ones_out_of_the_medians_and_prints_nothing_raw(fleet):
    with tempfile.TemporaryDirectory() as folder:
        for i, (name, gpu, speeds, status) in enumerate(fleet):
            record = {"fleet_node": 1, "node": name, "status": status, "check": a_check(gpu, speeds, status if status != "unreachable" else "ok")}
            Path(folder, f"n{i}.json").write_text(json.dumps(record))
        Path(folder, "stray.json").write_text('{"something": "else"}')
        report = load_report([Path(folder)])
        lines = terminal_lines(report)
        document = to_markdown(blocks(report, []))
        json.dumps(to_json(report), allow_nan=False)  # every number in the JSON is finite
    # every node is there, under a name of its own
    assert len(report.nodes) == len(fleet) and len({n.name for n in report.nodes}) == len(fleet)
    by_file = {Path(n.file).name: n for n in report.nodes}
    good_speeds: list[float] = []
    for i, (name, _gpu, speeds, status) in enumerate(fleet):
        node = by_file[f"n{i}.json"]
        expected_bad = not (0 < len(name) <= MAX_NAME) or not all(finite_speed(v) or not isinstance(v, (int, float)) or isinstance(v, bool) for v in speeds)
        assert (node.status == BAD_INPUT) == expected_bad, (node, speeds)
        if not expected_bad:
            assert node.status == status
            good_speeds += [float(v) for v in speeds if finite_speed(v)]
    # a median is of finite speeds only, and of every one of them
    medians = [m for by_peers in report.medians.values() for m, _unit in by_peers.values()]
    assert all(math.isfinite(m) and 0 <= m <= MAX_MEASURED for m in medians)
    if good_speeds and len({gpu for _n, gpu, _s, _st in fleet}) == 1:
        assert medians == [statistics.median(good_speeds)]
    # no all-clear while a node is not healthy, is bad input, or shares its name
    names_given = [name for name, *_ in fleet]
    unhealthy = any(n.status not in HEALTHY for n in report.nodes) or len(set(names_given)) < len(names_given)
    assert report.exit_code == (1 if unhealthy or report.outliers else 0)
    assert [s.file for s in report.skipped] == [str(Path(folder, "stray.json"))]
    # nothing raw in what reaches a terminal; each node is named there
    assert all(clean(line) for line in lines + skipped_lines(report))
    assert clean(document.replace("\n", ""))
    shown = "\n".join(lines)
    assert all(printable(node.name) in shown for node in report.nodes)


@settings(PROPERTY, max_examples=15)  # each example draws a PNG
@given(st.lists(st.tuples(names.map(lambda n: n or "x"), names), min_size=1, max_size=3))
@example([("gpu$\\x$\x1b]0;t\x07", "H$\\y$\x07")])
def test_any_names_draw_a_plot_without_math_text_or_a_raw_control_in_a_warning(named):
    with tempfile.TemporaryDirectory() as folder:
        for i, (name, gpu) in enumerate(named):
            record = {"fleet_node": 1, "node": name, "status": "ok", "check": a_check(gpu, [700.0 + i], "ok")}
            Path(folder, f"n{i}.json").write_text(json.dumps(record))
        report = load_report([Path(folder)])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            file = plot(report, "micro.matmul_bf16", "bf16 matmul", Path(folder))
        assert file is not None and Path(folder, file).stat().st_size > 1000
    assert all(clean(str(w.message)) for w in caught), [str(w.message) for w in caught]


# --- the fleet check's side ------------------------------------------------------------------

outputs = st.lists(
    st.one_of(
        st.text(max_size=40),
        st.sampled_from(["@@gputui-fleet node ", "@@gputui-fleet check", "@@gputui-fleet recording", "@@gputui-fleet exit 0", "@@gputui-fleet exit -x"]),
        names.map(lambda n: f"@@gputui-fleet node {n}"),
        st.sampled_from(["H4sIAAAAAAAA", "e30=", "eyJjaGVja3MiOiBbXSwgInZlcmRpY3QiOiB7fX0=", "!!!"]),
    ),
    max_size=12,
).map("\n".join)


@PROPERTY
@given(names, st.one_of(st.none(), st.integers(-300, 300)), outputs, st.text(max_size=200) | names, st.dictionaries(names, st.integers() | names, max_size=3))
def test_whatever_a_node_prints_is_a_result_and_its_line_is_escaped(node, returncode, stdout, stderr, counts):
    result = node_result(node, returncode, stdout, stderr, 1.0)
    assert clean(result.line())
    if result.check is not None:
        result.check["verdict"]["counts"] = counts
    assert clean(result.line())
    hostname = split_output(stdout).hostname
    assert hostname is None or len(hostname) <= MAX_NAME


@PROPERTY
@given(st.lists(names, min_size=1, max_size=8))
@example(["gpu 1", "gpu_1", "GPU_1", "ubuntu", "ubuntu", "." * 3, "a" * 300, "a" * 299 + "b"])
def test_every_result_of_a_fleet_check_gets_a_file_of_its_own_and_shared_names_are_named(node_names):
    node_names = [n[:MAX_NAME] for n in node_names]
    with tempfile.TemporaryDirectory() as folder:
        results = ResultFolder(Path(folder))
        paths = [results.save(NodeResult(name, "ok", check=a_check("H200", [700.0], "ok"))) for name in node_names]
        assert len({p.name.lower() for p in paths}) == len(node_names) and all(len(p.name) < 230 for p in paths)
        shared = {name for name in node_names if node_names.count(name) > 1}
        assert set(results.shared_names()) == shared
        report = load_report([Path(folder)])
    assert len(report.nodes) == len(node_names) and set(report.shared_names) >= {n for n in shared if n}
    assert report.exit_code == (1 if shared or any(not n for n in node_names) else 0)


@PROPERTY
@given(st.lists(st.text(max_size=300) | names, max_size=4))
@example(["a" * 254])
@example(["b" * 5000])
@example(["x" * 33 + "@h"])
def test_a_hostfile_reads_or_is_one_line(lines):
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "hosts")
        path.write_text("\n".join(lines), encoding="utf-8")
        try:
            hosts = read_hostfile(path)
        except UserError as exc:
            assert str(exc).startswith(str(path)) and len(str(exc)) < 400 and "\n" not in str(exc)
            return
    assert hosts and all(len(h) <= MAX_NAME and not h.startswith("-") for h in hosts)
