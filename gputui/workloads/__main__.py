"""The benchmark worker that workload presets launch: ``python -m gputui.workloads``.

Flags mirror the preset keys (``batch_size`` -> ``--batch-size``).  Results go to
stdout as protocol lines (see protocol.py); the human summary goes to stderr.
"""

from __future__ import annotations

import argparse
import sys

from gputui.workloads.catalog import FRAMEWORKS, METHODS, PIPELINES
from gputui.workloads.protocol import Emitter


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m gputui.workloads", description=__doc__)
    parser.add_argument("--framework", choices=tuple(FRAMEWORKS), required=True)
    parser.add_argument("--model", default=None)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup-steps", type=int, default=10)
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--pipeline", choices=PIPELINES, default="synthetic")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--image-size", type=int, default=None)
    parser.add_argument("--seq-len", type=int, default=None)
    parser.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=False)
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=False)
    parser.add_argument("--xla", action=argparse.BooleanOptionalAction, default=False)
    parser.add_argument("--method", choices=METHODS, default="steps")
    parser.add_argument("--find-max-batch", action=argparse.BooleanOptionalAction, default=False)
    args = parser.parse_args(argv)
    spec = FRAMEWORKS[args.framework]
    args.model = args.model or spec["models"][0]
    if args.model not in spec["models"]:
        parser.error(f"--model: {args.model!r} is not a {args.framework} model (expected one of: {', '.join(spec['models'])})")
    if args.precision not in spec["precisions"]:
        parser.error(f"--precision: expected one of {', '.join(spec['precisions'])} for {args.framework}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    emitter = Emitter()
    if args.framework == "smoke":
        from gputui.workloads import smoke

        result = smoke.run(args.batch_size, args.steps, args.warmup_steps, emitter)
    else:
        print(f"gputui.workloads: framework {args.framework!r} is not available in this version", file=sys.stderr)
        return 2
    print(f"{args.model}: {result['samples_per_sec']:.1f} samples/sec (median of {args.steps} steps)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
