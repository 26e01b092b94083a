"""The benchmark worker that workload presets launch: ``python -m gputui.workloads``.

Flags mirror the preset keys (``batch_size`` -> ``--batch-size``).  Results go to
stdout as protocol lines (see gputui/protocol.py); the human summary goes to stderr.

Exit codes: 0 done, 1 error, 2 the framework (or a package it needs) is missing or
the arguments are wrong, 3 out of device memory (after a protocol ``oom`` line).
"""

from __future__ import annotations

import argparse
import sys

from gputui.catalog import AUGMENT_LEVELS, COMPILE_MODES, DEVICES, FRAMEWORKS, METHODS, MODELS, PIPELINES
from gputui.protocol import Emitter, ResultLine, RunInfo, rank_from_environment
from gputui.workloads.batch_search import TrialFailed
from gputui.workloads.measure import (
    EXIT_ERROR,
    EXIT_MISSING_FRAMEWORK,
    EXIT_OK,
    EXIT_OOM,
    TF_METAL_EPOCHS,
    MissingFramework,
    WorkloadOutOfMemory,
)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("expected a whole number of 1 or more")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError("expected a whole number of 0 or more")
    return value


def _replicas(text: str) -> int:
    """A number of replicas, or "all" (0: every GPU)."""
    return 0 if text == "all" else _positive(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gputui.workloads", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--framework", choices=tuple(FRAMEWORKS), required=True)
    parser.add_argument("--model", default=None)
    parser.add_argument("--batch-size", type=_positive, default=32)
    parser.add_argument("--steps", type=_positive, default=30, help="measured steps (tf-metal: steps per epoch)")
    parser.add_argument("--warmup-steps", type=_non_negative, default=10)
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--pipeline", choices=PIPELINES, default="synthetic")
    parser.add_argument("--workers", type=_non_negative, default=4, help="host pipeline: loader worker processes")
    parser.add_argument("--augment", choices=AUGMENT_LEVELS, default="light",
                        help="host pipeline, CNNs: per-image CPU work (heavy: rotation, colour jitter, blur)")  # fmt: skip
    parser.add_argument("--image-size", type=_positive, default=None)
    parser.add_argument("--seq-len", type=_positive, default=None)
    parser.add_argument("--channels-last", action=argparse.BooleanOptionalAction, default=False)
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=False)
    parser.add_argument("--compile-mode", choices=COMPILE_MODES, default="default",
                        help="torch.compile mode (with --compile)")  # fmt: skip
    parser.add_argument("--xla", action=argparse.BooleanOptionalAction, default=False)
    parser.add_argument("--device", choices=DEVICES, default="auto", help="auto: cuda when available, else cpu")
    parser.add_argument("--method", choices=METHODS, default="steps")
    parser.add_argument("--epochs", type=_positive, default=TF_METAL_EPOCHS, help="tf-metal method: timed epochs")
    parser.add_argument("--find-max-batch", action=argparse.BooleanOptionalAction, default=False)
    parser.add_argument(
        "--data-parallel",
        type=_replicas,
        default=1,
        metavar="N|all",
        help="tf: replicas of MirroredStrategy (GPUs, else logical CPU devices); torch: launch through torchrun instead (a preset's data_parallel key does)",
    )
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    spec = FRAMEWORKS[args.framework]
    args.model = args.model or spec["models"][0]
    if args.model not in spec["models"]:
        parser.error(f"--model: {args.model!r} is not a {args.framework} model (expected one of: {', '.join(spec['models'])})")
    if args.precision not in spec["precisions"]:
        parser.error(f"--precision: expected one of {', '.join(spec['precisions'])} for {args.framework}")
    if args.framework == "torch" and args.xla:
        parser.error("--xla is a TensorFlow option; PyTorch uses --compile")
    if args.framework != "tf" and args.data_parallel != 1:
        parser.error("--data-parallel: TensorFlow only; PyTorch runs one process per rank under torchrun")
    return args


def _summary(args: argparse.Namespace, result: ResultLine) -> str:
    rate = result.get("samples_per_sec")
    if result.get("mode") == "find-max-batch":
        return f"{args.model}: largest batch that fits: {result.get('max_batch_size')} ({rate or 0:.1f} samples/sec)"
    kind = MODELS[args.model].kind if args.model in MODELS else ""
    unit = "sequences" if kind == "transformer" else "images" if kind == "cnn" else "samples"
    how = (f"median of {result.get('windows', '?')} windows over {args.steps} steps" if args.method == "steps"
           else f"tf-metal: {args.steps} steps x {args.epochs} epochs")  # fmt: skip
    line = f"{args.model}: {rate or 0:.1f} {unit}/sec ({how})"
    if result.get("achieved_tflops"):
        line += f", {result['achieved_tflops']:.1f} TFLOP/s"
    return line


def main(argv: list[str] | None = None) -> int:
    raw = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(raw)
    rank, world_size = rank_from_environment()  # torchrun's ranks say which they are
    emitter = Emitter(rank=rank, world_size=world_size)
    info = RunInfo(framework=args.framework, model=args.model, precision=args.precision)
    try:
        if args.find_max_batch:
            from gputui.workloads import batch_search

            result = batch_search.run(raw, start=args.batch_size, steps=args.steps,
                                      warmup_steps=args.warmup_steps, emitter=emitter, info=info)  # fmt: skip
        elif args.framework == "smoke":
            from gputui.workloads import smoke

            result = smoke.run(args.batch_size, args.steps, args.warmup_steps, emitter)
        elif args.framework == "torch":
            from gputui.workloads import torch_workload

            result = torch_workload.run(args, emitter)
        elif args.framework == "tf":
            from gputui.workloads import tf_workload

            result = tf_workload.run(args, emitter)
        else:
            print(f"gputui.workloads: framework {args.framework!r} is not available in this version", file=sys.stderr)
            return EXIT_MISSING_FRAMEWORK
    except MissingFramework as exc:
        print(f"gputui.workloads: {args.framework} {args.model}: {exc}", file=sys.stderr)
        return EXIT_MISSING_FRAMEWORK
    except WorkloadOutOfMemory as exc:
        emitter.oom(**exc.fields)
        print(f"gputui.workloads: {args.model} at batch size {exc.fields.get('batch_size')}: out of memory: {exc.message}",
              file=sys.stderr)  # fmt: skip
        return EXIT_OOM
    except TrialFailed as exc:
        print(f"gputui.workloads: --find-max-batch: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except ValueError as exc:  # a setting the workload cannot honour (e.g. --device cuda without CUDA)
        print(f"gputui.workloads: {exc}", file=sys.stderr)
        return EXIT_ERROR
    print(_summary(args, result), file=sys.stderr)
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
