"""Regenerate the progress-output fixtures in this folder.

Every fixture is rendered by the tool's OWN printing code (or by its exact
format string where the tool is a big framework that can't be run here), driven
by a fake clock so the output is deterministic.  See SOURCES.md.

Needs (not project dependencies, only for regenerating):
  * tqdm importable (rendered with tqdm 4.69.1 source, tqdm/tqdm@f6a30fa)
  * numpy
  * the Keras Progbar sources extracted from keras-team/keras:
        git show HEAD:keras/src/utils/progbar.py            > $SRC/keras3_progbar.py
        git show v2.12.0:keras/utils/generic_utils.py  (class Progbar only) > $SRC/tfkeras2_progbar.py
    with SRC=$KERAS_PROGBAR_SRC (default /tmp/src).

Run:  PYTHONPATH=/path/to/tqdm python tests/data/progress/make_fixtures.py
"""

import io
import json
import math
import os
import re
import sys
import types
from datetime import datetime, timedelta

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("KERAS_PROGBAR_SRC", "/tmp/src")
COLS = 120  # terminal width; tqdm's dynamic_ncols gives cols - 1


class Clock:
    def __init__(self, t=1_760_000_000.0):
        self.t = t

    def __call__(self):
        return self.t

    def adv(self, dt):
        self.t += dt


CLOCK = Clock()


class Term(io.StringIO):
    """One pty: stdout and stderr both end up here, as in a terminal."""

    encoding = "utf-8"  # so tqdm uses the unicode block bar, as in a UTF-8 terminal

    def isatty(self):
        return True


def setup_tqdm(term):
    import tqdm.std as S

    S.time = CLOCK  # tqdm reads `time()` from its module globals in __init__
    S._screen_shape_wrapper = lambda: lambda fp: (COLS - 1, 39)
    sys.stdout = sys.stderr = term
    return S.tqdm


def restore():
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__


def write(name, text):
    with open(os.path.join(HERE, name), "w", encoding="utf-8", newline="") as f:
        f.write(text)


# ---------------------------------------------------------------- tqdm
def gen_tqdm():
    out = {}
    # 1. plain it/s bar
    term = Term()
    tqdm = setup_tqdm(term)
    bar = tqdm(total=500, desc="train")
    for i in range(10):
        CLOCK.adv(2.0 + 0.1 * (i % 3))
        bar.update(50)
    bar.close()
    restore()
    out["tqdm_its.log"] = term.getvalue()

    # 2. slow s/it bar
    term = Term()
    tqdm = setup_tqdm(term)
    bar = tqdm(total=20, desc="train")
    for i in range(8):
        CLOCK.adv(2.4 + 0.2 * (i % 2))
        bar.update(1)
    bar.close()
    restore()
    out["tqdm_sit.log"] = term.getvalue()

    # 3. unit_scale=True fast bar ("1.23kit/s"), preceded by a byte download bar
    term = Term()
    tqdm = setup_tqdm(term)
    dl = tqdm(total=440_473_613, unit="B", unit_scale=True, unit_divisor=1024, desc="model.safetensors")
    for i in range(5):
        CLOCK.adv(0.9)
        dl.update(88_094_722 if i < 4 else 440_473_613 - 4 * 88_094_722)
    dl.close()
    bar = tqdm(total=50_000, unit_scale=True)
    for i in range(10):
        CLOCK.adv(0.8 + 0.05 * (i % 2))
        bar.update(1000)
    bar.close()
    restore()
    out["tqdm_unit_scale.log"] = term.getvalue()

    # 4. unit="img" (samples), with a download bar before it
    term = Term()
    tqdm = setup_tqdm(term)
    dl = tqdm(total=170_498_071, unit="B", unit_scale=True, unit_divisor=1024, desc="Downloading cifar-10-python.tar.gz")
    for i in range(4):
        CLOCK.adv(1.1)
        dl.update(42_624_517 if i < 3 else 170_498_071 - 3 * 42_624_517)
    dl.close()
    bar = tqdm(total=50_000, unit="img", desc="Epoch 1")
    for i in range(10):
        CLOCK.adv(6.0 + 0.3 * (i % 3))
        bar.update(5_000)
    bar.close()
    restore()
    out["tqdm_img.log"] = term.getvalue()

    # 5. unit="tok", unit_scale=True (tokens)
    term = Term()
    tqdm = setup_tqdm(term)
    bar = tqdm(total=20_000_000, unit="tok", unit_scale=True, desc="pretrain")
    for i in range(10):
        CLOCK.adv(43.0 + 2.0 * (i % 2))
        bar.update(2_000_000)
    bar.close()
    restore()
    out["tqdm_tok.log"] = term.getvalue()
    return out


# ---------------------------------------------------------------- HF Trainer
def fmt_v5(logs):
    # transformers v5 ProgressCallback.on_log: floats -> f"{v:.4g}" strings
    return {k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in logs.items()}


def gen_hf(variant):
    """variant: 'v4', 'v5', 'tokens' (v4 + include_num_input_tokens_seen/include_tokens_per_second)."""
    term = Term()
    tqdm = setup_tqdm(term)
    max_steps, logging_steps, eval_steps, eval_batches = 120, 20, 60, 25
    world, per_dev_bs, seq = 4, 8, 512
    start = CLOCK()
    tokens_seen = 0
    training_bar = tqdm(total=max_steps, dynamic_ncols=True)
    lr0 = 5e-05
    step_time = [0.245, 0.238, 0.251]

    def on_log(logs):
        logs = dict(logs)
        logs.pop("total_flos", None)
        if variant == "v5":
            logs = fmt_v5(logs)
        elif "epoch" in logs:
            logs["epoch"] = round(logs["epoch"], 2)
        training_bar.write(str(logs))

    for step in range(1, max_steps + 1):
        CLOCK.adv(step_time[step % 3])
        tokens_seen += world * per_dev_bs * seq - (step * 37) % 900
        training_bar.update(1)
        if step % logging_steps == 0:
            loss = 2.9 * math.exp(-step / 150) + 0.35 + 0.01 * (step % 7)
            logs = {
                "loss": round(loss, 4) if variant != "v5" else loss,
                "grad_norm": 1.0 + 3.7 / (1 + step / 10) + step / 97.0 * 0.01 + 0.1234567891234567,
                "learning_rate": lr0 * (1 - step / max_steps) + (1e-20 if step % 40 == 0 else 0.0),
                "epoch": step / 40.0 * (1 + 1e-16),
            }
            if variant == "tokens":
                logs["num_input_tokens_seen"] = tokens_seen
                rt = CLOCK() - start
                logs["train_runtime"] = round(rt, 4)
                logs["train_tokens_per_second"] = round(tokens_seen / rt, 3)
            on_log(logs)
        if step % eval_steps == 0:
            pbar = None
            for b in range(eval_batches):
                CLOCK.adv(0.09 + 0.01 * (b % 2))
                if pbar is None:
                    pbar = tqdm(total=eval_batches, leave=False, dynamic_ncols=True)
                pbar.update(1)
            pbar.close()
            ev_rt = 0.1 * eval_batches + 0.11
            ev = {
                "eval_loss": 0.6123 - step / 1000.0 + 0.0000123456789,
                "eval_runtime": round(ev_rt, 4),
                "eval_samples_per_second": round(eval_batches * 32 / ev_rt, 3),
                "eval_steps_per_second": round(eval_batches / ev_rt, 3),
                "epoch": step / 40.0,
            }
            if variant == "tokens":
                ev["num_input_tokens_seen"] = tokens_seen
            on_log(ev)
    CLOCK.adv(0.35)
    runtime = CLOCK() - start
    final = {
        "train_runtime": round(runtime, 4),
        "train_samples_per_second": round(max_steps * world * per_dev_bs / runtime, 3),
        "train_steps_per_second": round(max_steps / runtime, 3),
    }
    if variant == "tokens":
        # transformers 4.x: num_train_tokens = self.num_tokens(train_dataloader, max_steps) on THIS rank
        per_rank_tokens = max_steps * per_dev_bs * seq
        final["train_tokens_per_second"] = round(per_rank_tokens / runtime, 3)
    final["total_flos"] = 1.0123e16
    final["train_loss"] = 0.9876543210123456
    final["epoch"] = 3.0
    if variant == "tokens":
        final["num_input_tokens_seen"] = tokens_seen
    on_log(final)
    training_bar.close()
    restore()
    return term.getvalue(), final


# ---------------------------------------------------------------- Lightning TQDMProgressBar
def gen_lightning():
    term = Term()
    _tqdm = setup_tqdm(term)
    _PAD_SIZE = 5

    class Tqdm(_tqdm):  # lightning/pytorch/callbacks/progress/tqdm_progress.py
        @staticmethod
        def format_num(n):
            should_be_padded = isinstance(n, (float, str))
            if not isinstance(n, str):
                n = _tqdm.format_num(n)
            if should_be_padded and "e" not in n:
                if "." not in n and len(n) < _PAD_SIZE:
                    try:
                        _ = float(n)
                    except ValueError:
                        return n
                    n += "."
                n += "0" * (_PAD_SIZE - len(n))
            return n

    BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_noinv_fmt}{postfix}]"
    refresh_rate = 10
    kw = dict(dynamic_ncols=True, file=sys.stdout, bar_format=BAR_FORMAT)

    def should_update(n, total):
        return n % refresh_rate == 0 or n == total

    def update_n(bar, n):
        if not bar.disable:
            bar.n = n
            bar.refresh()

    # sanity check (2 val batches)
    val = Tqdm(desc="Sanity Checking", position=0, leave=False, **kw)
    train = Tqdm(disable=True)
    val.reset()
    val.total = 2
    val.initial = 0
    val.set_description("Sanity Checking DataLoader 0")
    for b in range(2):
        CLOCK.adv(0.06)
        update_n(val, b + 1)
    val.close()
    train.close()

    train = Tqdm(desc="Training", position=0, leave=True, smoothing=0, **kw)
    n_train, n_val = 50, 20
    metrics = {"v_num": 0}
    for epoch in range(2):
        train.reset()
        train.total = n_train
        train.initial = 0
        train.set_description(f"Epoch {epoch}")
        for b in range(n_train):
            CLOCK.adv(0.112 if b % 2 else 0.108)
            n = b + 1
            if should_update(n, n_train):
                metrics["train_loss"] = round(1.9 * math.exp(-(epoch * n_train + n) / 40) + 0.31 + 0.002 * (n % 3), 6)
                update_n(train, n)
                train.set_postfix(metrics)
        # validation
        val = Tqdm(desc="Validation", position=1, leave=False, **kw)
        val.reset()
        val.total = n_val
        val.initial = 0
        val.set_description("Validation DataLoader 0")
        for b in range(n_val):
            CLOCK.adv(0.031)
            if should_update(b + 1, n_val):
                update_n(val, b + 1)
        val.close()
        metrics["val_loss"] = round(0.71 - 0.12 * epoch, 6)
        train.set_postfix(metrics)
        train.set_postfix(metrics)  # on_train_epoch_end
    train.close()
    restore()
    return term.getvalue()


# ---------------------------------------------------------------- Keras
def load_progbar(path):
    src = open(path, encoding="utf-8").read()
    src = re.sub(r"^(from keras.*|import keras.*|import (time|sys|os|math)|import numpy as np)$", "", src, flags=re.M)
    buf = []
    io_utils = types.SimpleNamespace(print_msg=lambda m, line_break=True: buf.append(m + ("\n" if line_break else "")))
    fake_sys = types.SimpleNamespace(stdout=types.SimpleNamespace(isatty=lambda: True), modules={})
    fake_time = types.SimpleNamespace(time=CLOCK)
    ns = {"math": math, "os": os, "sys": fake_sys, "time": fake_time, "np": np, "io_utils": io_utils, "keras_export": lambda *a, **k: lambda c: c}
    exec(compile(src, path, "exec"), ns)
    return ns["Progbar"], buf


def gen_keras3(verbose):
    Progbar, buf = load_progbar(os.path.join(SRC, "keras3_progbar.py"))
    steps, epochs = 1875, 2
    for ep in range(epochs):
        buf.append(f"Epoch {ep + 1}/{epochs}\n")
        pb = Progbar(target=steps, verbose=verbose, unit_name="step")
        first = 0.9  # first step includes tracing/compilation
        seen = 0
        points = [1, 100, 300, 520, 760, 1000, 1250, 1500, 1720, 1875]
        for k, cur in enumerate(points):
            dt = first if cur == 1 else (cur - seen) * (0.0031 + 0.0002 * (k % 3)) * (0.93 if ep else 1.0)
            CLOCK.adv(dt)
            seen = cur
            acc = 0.86 + 0.1 * (1 - math.exp(-cur / 600)) + 0.02 * ep
            loss = 0.48 * math.exp(-cur / 900) + 0.12 - 0.04 * ep
            logs = [("accuracy", acc), ("loss", loss)]
            if cur == steps:
                logs += [("val_accuracy", 0.9612 + 0.01 * ep), ("val_loss", 0.1288 - 0.02 * ep)]
            pb.update(cur, logs, finalize=(cur == steps))
    return "".join(buf)


def gen_tfkeras2(verbose):
    Progbar, buf = load_progbar(os.path.join(SRC, "tfkeras2_progbar.py"))
    steps, epochs = 1875, 2
    for ep in range(epochs):
        buf.append(f"Epoch {ep + 1}/{epochs}\n")
        pb = Progbar(target=steps, verbose=verbose, stateful_metrics=None, unit_name="step")
        seen = 0
        for k, cur in enumerate([1, 120, 400, 700, 1000, 1300, 1600, 1875]):
            dt = 1.2 if cur == 1 else (cur - seen) * (0.0027 + 0.0002 * (k % 2))
            CLOCK.adv(dt)
            seen = cur
            loss = 0.52 * math.exp(-cur / 800) + 0.15 - 0.05 * ep
            acc = 0.84 + 0.1 * (1 - math.exp(-cur / 700)) + 0.02 * ep
            pb.update(cur, [("loss", loss), ("accuracy", acc)])
    return "".join(buf)


# ---------------------------------------------------------------- accelerate (verbatim published output)
ACCELERATE = (
    "epoch 0: {'accuracy': 0.6862745098039216, 'f1': 0.8134110787172011}\n"
    "epoch 1: {'accuracy': 0.75, 'f1': 0.840625}\n"
    "epoch 2: {'accuracy': 0.8137254901960784, 'f1': 0.8671328671328671}\n"
)


# ---------------------------------------------------------------- timm
def gen_timm(old):
    lines, rates = [], []
    world, bs = 8, 128
    gbs = world * bs
    updates = 1251
    tsum, tn = 0.0, 0
    dsum = 0.0
    epoch = 0
    for idx in [0, 50, 100, 150, 200, 250, 300, 350, 400, 450]:
        t = 1.842 if idx == 0 else 0.298 + 0.004 * ((idx // 50) % 3)
        d = 1.503 if idx == 0 else 0.010 + 0.001 * ((idx // 50) % 2)
        # AverageMeter over EVERY update (log_interval=50); approximate the in-between updates with t
        n_new = 1 if idx == 0 else 50
        tsum += t * n_new
        tn += n_new
        dsum += d * n_new
        tavg, davg = tsum / tn, dsum / tn
        lr = 1e-6 + (1e-3 - 1e-6) * min(1.0, idx / 1251)
        loss_now = 6.91 - 0.0021 * idx + 0.013 * ((idx // 50) % 2)
        loss_avg = 6.91 - 0.00105 * idx
        if old:  # timm 0.6.12: rate = input.size(0) * world_size / batch_time
            s = (
                f"Train: {epoch} [{idx:>4d}/{updates} ({100.0 * idx / (updates - 1):>3.0f}%)]  "
                f"Loss: {loss_now:#.4g} ({loss_avg:#.3g})  "
                f"Time: {t:.3f}s, {bs * world / t:>7.2f}/s  "
                f"({tavg:.3f}s, {bs * world / tavg:>7.2f}/s)  "
                f"LR: {lr:.3e}  "
                f"Data: {d:.3f} ({davg:.3f})"
            )
            rates.append(float(f"{bs * world / t:.2f}"))
        else:  # timm HEAD (1.0.x): update_sample_count = global batch (incl. world size) of this update
            s = (
                f"Train: {epoch} [{idx:>4d}/{updates} "
                f"({100.0 * (idx + 1) / updates:>3.0f}%)]  "
                f"Loss: {loss_now:#.3g} ({loss_avg:#.3g})  "
                f"Time: {t:.3f}s, {gbs / t:>7.2f}/s  "
                f"({tavg:.3f}s, {gbs / tavg:>7.2f}/s)  "
                f"LR: {lr:.3e}  "
                f"Data: {d:.3f} ({davg:.3f})"
            )
            rates.append(float(f"{gbs / t:.2f}"))
        lines.append(s)
    # validation lines (must be ignored)
    for bi, last in [(0, 48), (48, 48)]:
        lines.append(
            f"Test: [{bi:>4d}/{last}]  Time: {0.812 if bi == 0 else 0.093:.3f} ({0.812 if bi == 0 else 0.110:.3f})  "
            f"Loss: {5.123 if bi == 0 else 5.402:>7.3f} ({5.123 if bi == 0 else 5.311:>6.3f})  "
            f"Acc@1: {7.031 if bi == 0 else 5.469:>7.3f} ({7.031 if bi == 0 else 6.120:>7.3f})  "
            f"Acc@5: {19.531 if bi == 0 else 17.969:>7.3f} ({19.531 if bi == 0 else 18.302:>7.3f})"
        )
    return "\n".join(lines) + "\n", rates


# ---------------------------------------------------------------- nanoGPT / build-nanogpt
def gen_nanogpt():
    lines = ["tokens per iteration will be: 491,520"]
    lines.append("compiling the model... (takes a ~minute)")
    lines.append("step 0: train loss 10.9881, val loss 10.9864")
    rates = []
    running = -1.0
    for it in range(0, 12):
        dt = 31245.67 if it == 0 else 135.21 + (it % 3) * 0.87 - (0.4 if it % 4 == 0 else 0)
        loss = 10.98 - 0.31 * it + 0.02 * (it % 2)
        if it >= 5:
            mfu = 0.3012 + 0.001 * (it % 3)
            running = mfu if running == -1.0 else 0.9 * running + 0.1 * mfu
        lines.append(f"iter {it}: loss {loss:.4f}, time {dt:.2f}ms, mfu {running * 100:.2f}%")
        rates.append(1000.0 / float(f"{dt:.2f}"))
    return "\n".join(lines) + "\n", rates


def gen_build_nanogpt():
    lines = [
        "using device: cuda",
        "total desired batch size: 524288",
        "=> calculated gradient accumulation steps: 1",
        "found 99 shards for split train",
        "found 1 shards for split val",
        "num decayed parameter tensors: 50, with 124,354,560 parameters",
        "num non-decayed parameter tensors: 98, with 121,344 parameters",
        "using fused AdamW: True",
        "validation loss: 10.9502",
    ]
    rates = []
    for step in range(0, 10):
        dt = 15.873 if step == 0 else 0.33412 + 0.0011 * (step % 3)  # seconds; step 0 includes compile
        tps = 524288 / dt
        loss = 10.955 - 0.42 * step + 0.01 * (step % 2)
        lr = 6e-4 * (step + 1) / 715
        norm = 15.2 / (1 + step) + 0.3
        lines.append(f"step {step:5d} | loss: {loss:.6f} | lr {lr:.4e} | norm: {norm:.4f} | dt: {dt * 1000:.2f}ms | tok/sec: {tps:.2f}")
        rates.append(float(f"{tps:.2f}"))
    return "\n".join(lines) + "\n", rates


# ---------------------------------------------------------------- torchtitan
class C:  # torchtitan/tools/utils.py Color
    black = "\033[30m"
    red = "\033[31m"
    green = "\033[32m"
    yellow = "\033[33m"
    blue = "\033[34m"
    magenta = "\033[35m"
    cyan = "\033[36m"
    white = "\033[37m"
    reset = "\033[39m"
    orange = "\033[38;2;180;60;0m"
    turquoise = "\033[38;2;54;234;195m"


def gen_torchtitan():
    t0 = datetime(2025, 6, 4, 8, 51, 37, 512000)

    def pre(t):
        return f"[rank0]:[titan] {t.strftime('%Y-%m-%d %H:%M:%S')},{t.microsecond // 1000:03d} - root - INFO - "

    lines = [pre(t0) + "Training starts at step 1."]
    rates = []
    color = C
    flops_per_token = 5.7908e10  # llama3 8B-ish: 6N + attention
    peak = 989e12
    t = t0
    for step in [1, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100]:
        tps = 375.4 if step == 1 else 7034.2 - 12.0 * (step % 20 == 0) + 3.1 * (step % 3)
        t += timedelta(seconds=10.48 if step == 1 else 11.66)
        tflops = flops_per_token * tps / 1e12
        mfu = 100 * flops_per_token * tps / peak
        loss = 12.2254 if step == 1 else 12.2254 - 3.5 * math.log10(step)
        gn = 4.1234 / (1 + step / 30)
        mem_gib, mem_pct = (27.34, 28.78) if step == 1 else (30.99, 32.62)
        mfu_str = f"{mfu:.2f}%"
        lines.append(
            pre(t)
            + (
                f"{color.red}step: {step:2}  "
                f"{color.green}loss: {loss:8.5f}  "
                f"{color.orange}grad_norm: {gn:7.4f}  "
                f"{color.turquoise}memory: {mem_gib:5.2f}GiB"
                f"({mem_pct:.2f}%)  "
                f"{color.blue}tps: {round(tps):,}  "
                f"{color.cyan}tflops: {tflops:,.2f}  "
                f"{color.magenta}mfu: {mfu_str}{color.reset}"
            )
        )
        rates.append(round(tps))
        if step == 50:
            t += timedelta(seconds=3.2)
            lines.append(
                pre(t)
                + (
                    f"{color.yellow}validate step: {step:2}  "
                    f"{color.green}loss: {loss + 0.05:7.4f}  "
                    f"{color.turquoise}memory: {mem_gib:5.2f}GiB"
                    f"({mem_pct:.2f}%)  "
                    f"{color.blue}tps: {round(21876.4):,}{color.reset}"
                )
            )
    lines.append(pre(t) + "Training completed")
    return "\n".join(lines) + "\n", rates


# ---------------------------------------------------------------- Megatron-LM
def gen_megatron():
    lines, rates = [], []
    gbs, train_iters = 256, 500000
    t = datetime(2024, 9, 3, 15, 54, 54, 123456)
    consumed = 0
    for k, it in enumerate(range(10, 110, 10)):
        ms = 13035.3 if it == 10 else 1210.4 + 3.3 * (k % 3)
        consumed = it * gbs
        t += timedelta(milliseconds=ms * 10)
        tflops = 412.5 * 1210.4 / ms
        lr = 3e-4 * it / 2000
        loss = 10.9 - 0.45 * math.log(it)
        s = f" [{t.strftime('%Y-%m-%d %H:%M:%S.%f')}]"
        s += f" iteration {it:8d}/{train_iters:8d} |"
        s += f" consumed samples: {consumed:12d} |"
        s += f" elapsed time per iteration (ms): {ms:.1f} |"
        s += f" throughput per GPU (TFLOP/s/GPU): {tflops:.1f} |"
        s += f" learning rate: {lr:.6E} |"
        s += f" global batch size: {gbs:5d} |"
        s += " {}: {:.6E} |".format("lm loss", loss)
        s += f" loss scale: {1.0:.1f} |"
        s += f" grad norm: {2.87 / (1 + k):.3f} |"
        s += f" number of skipped iterations: {0:3d} |"
        s += f" number of nan iterations: {0:3d} |"
        lines.append(s)
        rates.append(gbs / (float(f"{ms:.1f}") / 1000.0))
        if it == 10:
            lines += [
                "Number of parameters in transformer layers in billions:  6.02",
                "Number of parameters in embedding layers in billions: 0.41",
                "Total number of parameters in billions: 6.44",
                "Theoretical memory footprints: weight and optimizer=46038.57 MB",
                "[Rank 0] (after 10 iterations) memory (MB) | allocated: 47211.3 | max allocated: 61234.8 | reserved: 66208.0 | max reserved: 66208.0",
            ]
        if it == 50:
            lines += ["-" * 100, " validation loss at iteration 50 | lm loss value: 7.913012E+00 | lm loss PPL: 2.732105E+03 | ", "-" * 100]
    return "\n".join(lines) + "\n", rates


# ---------------------------------------------------------------- DeepSpeed
def gen_deepspeed():
    lines, curr = [], []
    t = datetime(2025, 3, 11, 9, 41, 12, 402000)

    def ts():
        return f"[{t.strftime('%Y-%m-%d %H:%M:%S')},{t.microsecond // 1000:03d}]"

    batch = 64  # train_batch_size = micro_bs * grad_accum * dp_world_size (job-wide)
    start_step = 2
    total_elapsed = 0.0
    gstep = 0
    for gstep in range(1, 61):
        d = 0.2905 + 0.0037 * (gstep % 7) if gstep > 1 else 0.0
        if gstep > start_step:
            total_elapsed += d
        t += timedelta(seconds=d + 0.0021 if gstep > 1 else 1.9)
        if gstep % 10 == 0:
            lines.append(f"{ts()} [INFO] [logging.py:107:log_dist] [Rank 0] step={gstep}, skipped=0, lr=[{2e-5 * gstep / 100}], mom=[(0.9, 0.999)]")
            t += timedelta(milliseconds=2)
            lines.append(
                f"[Rank 0] time (ms) | fwd: {88.41 + gstep % 3:.2f} | bwd: {171.93 + gstep % 4:.2f} | bwd_inner: {163.02 + gstep % 4:.2f} | bwd_allreduce: {8.88:.2f} | step: {30.07 + gstep % 2:.2f}"
            )
            avg = batch / (total_elapsed / (gstep - start_step))
            cur = batch / (d + 1e-9)  # TIME_EPSILON
            lines.append(
                f"{ts()} [INFO] [timer.py:264:stop] epoch=0/micro_step={gstep * 4}/global_step={gstep}, "
                f"RunningAvgSamplesPerSec={avg}, CurrSamplesPerSec={cur}, "
                f"MemAllocated={4.32}GB, MaxMemAllocated={38.49}GB"
            )
            curr.append(cur)
    return "\n".join(lines) + "\n", curr


# ---------------------------------------------------------------- helpers for expected.json
RATE_RE = re.compile(r"([0-9.]+)([kMGTPEZY]?)(it|img|tok|B)/s|([0-9.]+)s/(it|img|tok)")
SI = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def tqdm_rates(text, must_contain, exclude=()):
    rates = []
    for seg in re.split(r"[\r\n]", text):
        if must_contain not in seg or any(e in seg for e in exclude):
            continue
        m = RATE_RE.search(seg.split("[")[-1])
        if not m:
            continue
        if m.group(1):
            rates.append(float(m.group(1)) * SI[m.group(2)])
        else:
            rates.append(1.0 / float(m.group(4)))
    return rates


def main():
    files, exp = {}, {}
    t = gen_tqdm()
    files.update(t)
    exp["tqdm_its.log"] = dict(
        unit="steps",
        per="job",
        live_rates=tqdm_rates(t["tqdm_its.log"], "train:"),
        final=None,
        ignored_lines=[],
        notes="Plain tqdm(total=500, desc='train'). Each \\r segment is one redraw; the first redraw "
        "has '?it/s' (no rate yet) and yields nothing. The last segment (written by close(), followed by \\n) "
        "shows the overall average n/elapsed instead of the EMA rate.",
    )
    exp["tqdm_sit.log"] = dict(
        unit="steps",
        per="job",
        live_rates=tqdm_rates(t["tqdm_sit.log"], "train:"),
        final=None,
        ignored_lines=[],
        notes="tqdm switches to the inverse 's/it' format when the rate is below 1 it/s; rate = 1/x.",
    )
    exp["tqdm_unit_scale.log"] = dict(
        unit="steps",
        per="job",
        live_rates=tqdm_rates(t["tqdm_unit_scale.log"], "k/50.0k"),
        final=None,
        ignored_lines=["model.safetensors", "B/s"],
        notes="unit_scale=True: counts and rates get SI prefixes ('1.23kit/s' = 1230 it/s; "
        "n/total also scaled: '10.0k/50.0k'). The first bar is a byte download "
        "(unit='B', unit_divisor=1024 for n/total but the RATE is scaled by 1000) and must yield nothing.",
    )
    exp["tqdm_img.log"] = dict(
        unit="samples",
        per="job",
        live_rates=tqdm_rates(t["tqdm_img.log"], "Epoch 1"),
        final=None,
        ignored_lines=["Downloading cifar-10-python.tar.gz", "B/s"],
        notes="Custom unit='img' (samples/s). Preceded by a byte download bar that must yield nothing.",
    )
    exp["tqdm_tok.log"] = dict(
        unit="tokens",
        per="job",
        live_rates=tqdm_rates(t["tqdm_tok.log"], "pretrain"),
        final=None,
        ignored_lines=[],
        notes="unit='tok', unit_scale=True: '45.5ktok/s' = 45500 tokens/s.",
    )

    for variant, fname in [("v4", "hf_trainer_v4.log"), ("v5", "hf_trainer_v5.log"), ("tokens", "hf_trainer_tokens.log")]:
        text, final = gen_hf(variant)
        files[fname] = text
        # training bar = the one with total 120; eval bars have total 25
        steps_rates = tqdm_rates(text, "/120 [")
        if variant == "tokens":
            tok = [float(x) for x in re.findall(r"'train_tokens_per_second': ([0-9.]+)", text)]
            live, fin = tok[:-1], tok[-1]
            exp[fname] = dict(
                unit="tokens",
                per="job",
                live_rates=live,
                final=fin,
                final_per="gpu",
                ignored_lines=["/25 [", "'eval_loss'"],
                other_units={
                    "steps": {"live_rates": steps_rates, "final": final["train_steps_per_second"]},
                    "samples": {"live_rates": [], "final": final["train_samples_per_second"]},
                },
                notes="transformers 4.4x with include_num_input_tokens_seen=True and include_tokens_per_second=True. "
                "Each logging dict then carries 'train_tokens_per_second' = num_input_tokens_seen (summed over all ranks) / "
                "seconds since train start (cumulative average, whole job). The FINAL dict's train_tokens_per_second in 4.x is "
                "num_tokens(train_dataloader of ONE rank) * grad_accum / runtime, i.e. per device (real example: 78016.9 live vs "
                "2737.98 final on 24 ranks). The tqdm bars are in steps (see other_units).",
            )
        else:
            exp[fname] = dict(
                unit="steps",
                per="job",
                live_rates=steps_rates,
                final=final["train_steps_per_second"],
                ignored_lines=["/25 [", "'eval_loss'"],
                other_units={"samples": {"live_rates": [], "final": final["train_samples_per_second"]}},
                notes=(
                    "Trainer training bar has NO description: it is 'NN%|bar| n/120 [..]'. The eval bar (also no "
                    "description, leave=False, position 1 so drawn after '\\n' and followed by ESC[A) can only be told "
                    "apart by its total (25 here) / by being nested. Logging dicts are written via tqdm.write (clear bar with "
                    "\\r+spaces+\\r, print dict + \\n, redraw bar). Final dict: train_samples_per_second counts samples of the "
                    "whole job (total_train_batch_size incl. world size), train_steps_per_second optimizer steps."
                )
                + (
                    " v5: ProgressCallback formats every float with f'{v:.4g}', so values are QUOTED strings "
                    "('train_samples_per_second': '130.1', large values become e.g. '1.234e+04')."
                    if variant == "v5"
                    else ""
                ),
            )

    text = gen_lightning()
    files["lightning_tqdm.log"] = text
    exp["lightning_tqdm.log"] = dict(
        unit="steps",
        per="job",
        live_rates=tqdm_rates(text, "Epoch "),
        final=None,
        ignored_lines=["Sanity Checking DataLoader 0", "Validation DataLoader 0"],
        notes="Lightning TQDMProgressBar(refresh_rate=10). BAR_FORMAT uses {rate_noinv_fmt}: ALWAYS it/s, never s/it "
        "(slow runs print e.g. ' 0.09it/s'). Train bar smoothing=0, so the rate is the epoch average since reset. "
        "Each update redraws twice (bar.refresh() then set_postfix()), so rates repeat. Validation bar is position 1 "
        "(after '\\n', then ESC[A) and leave=False; the epoch bar is reused (reset) for the next epoch.",
    )

    for verbose, fname in [(1, "keras3_progbar_tty.log"), (2, "keras3_verbose2.log")]:
        text = gen_keras3(verbose)
        files[fname] = text
        ms = [(float(v), u) for v, u in re.findall(r"(\d+)(ms|us|s)/step", text)]
        conv = {"ms": 1e-3, "us": 1e-6, "s": 1.0}
        rates = [1.0 / (v * conv[u]) if v else None for v, u in ms]
        exp[fname] = dict(
            unit="steps",
            per="job",
            live_rates=[r for r in rates if r],
            final=None,
            ignored_lines=[],
            notes=(
                "Keras 3 Progbar verbose=1 on a TTY: each update starts with '\\b' * previous width then '\\r'; "
                "counts bold (ESC[1m..ESC[0m), bar green/white (ESC[32m / ESC[37m), ETA or elapsed bold. "
                "Rate is time per step rounded to an integer in s, ms or us ('3ms/step' -> 333.3 steps/s; coarse). "
                "Step 1 includes compilation. 'Epoch i/n' lines are printed by ProgbarLogger."
                if verbose == 1
                else "Keras 3 verbose=2: one line per epoch: 'N/N - 6s - 3ms/step - metrics'. No ANSI, no \\r."
            )
            + " Integer ms means 3ms/step could be anything in [2.5, 3.5) ms.",
        )

    for verbose, fname in [(1, "tfkeras2_progbar_tty.log"), (2, "tfkeras2_verbose2.log")]:
        text = gen_tfkeras2(verbose)
        files[fname] = text
        ms = [(float(v), u) for v, u in re.findall(r"(\d+)(ms|us|s)/step", text)]
        conv = {"ms": 1e-3, "us": 1e-6, "s": 1.0}
        exp[fname] = dict(
            unit="steps",
            per="job",
            live_rates=[1.0 / (v * conv[u]) for v, u in ms if v],
            final=None,
            ignored_lines=[],
            notes=(
                "tf.keras 2.x (keras 2.12 Progbar) verbose=1 TTY: while the epoch runs the line shows ONLY 'ETA: 4s' "
                "(no per-step time); 'Xms/step' appears only on the finalized line at epoch end. So live_rates has one "
                "value per epoch. Redraw = '\\b'*prev_width + '\\r'."
                if verbose == 1
                else "tf.keras 2.12 verbose=2: 'N/N - 5s - loss: .. - accuracy: .. - 5s/epoch - 3ms/step' (time/step LAST)."
            ),
        )

    files["accelerate_nlp_example.log"] = ACCELERATE
    exp["accelerate_nlp_example.log"] = dict(
        unit="steps",
        per="job",
        live_rates=[],
        final=None,
        ignored_lines=["epoch 0: {'accuracy'"],
        notes="accelerate examples/nlp_example.py & complete_nlp_example.py print no progress bar and no "
        "rate: only accelerator.print(f'epoch {epoch}:', eval_metric) after each epoch's evaluation. "
        "Lines verbatim from accelerate docs (multi-GPU launch page). A parser must yield nothing.",
    )

    for old, fname in [(False, "timm_train.log"), (True, "timm_train_v0.6.log")]:
        text, rates = gen_timm(old)
        files[fname] = text
        exp[fname] = dict(
            unit="samples",
            per="job",
            live_rates=rates,
            final=None,
            ignored_lines=["Test: ["],
            notes="First '/s' number = samples/s of the last update (global batch incl. all ranks / update time); the one in "
            "parentheses uses the average update time. 8 ranks x 128 = 1024 samples per update."
            + (
                " Old format (timm 0.6.x): rate = input.size(0) * world_size / batch_time.val; loss {:#.4g}."
                if old
                else " Current format (timm 1.0.x train.py); loss {:#.3g}; percentage is (idx+1)/updates."
            ),
        )

    text, rates = gen_nanogpt()
    files["nanogpt.log"] = text
    exp["nanogpt.log"] = dict(
        unit="steps",
        per="job",
        live_rates=rates,
        final=None,
        tokens_per_step=491520,
        ignored_lines=["step 0: train loss", "tokens per iteration will be"],
        notes="nanoGPT prints time per iteration only; rate = 1000/ms iterations/s; multiply by the header's "
        "'tokens per iteration will be: 491,520' (grad_accum * world_size * batch * block_size, whole job) for tokens/s. "
        "iter 0 includes torch.compile (31 s). mfu prints -100.00% for the first 5 iterations (running_mfu=-1).",
    )
    text, rates = gen_build_nanogpt()
    files["build_nanogpt.log"] = text
    exp["build_nanogpt.log"] = dict(
        unit="tokens",
        per="job",
        live_rates=rates,
        final=None,
        ignored_lines=["validation loss:"],
        notes="build-nanogpt train_gpt2.py: tok/sec = B*T*grad_accum_steps*ddp_world_size / dt (whole job). Step 0 includes compile.",
    )

    text, rates = gen_torchtitan()
    files["torchtitan.log"] = text
    exp["torchtitan.log"] = dict(
        unit="tokens",
        per="gpu",
        live_rates=rates,
        final=None,
        ignored_lines=["validate step:"],
        notes="torchtitan MetricsProcessor.log: 'tps' = tokens per second PER DEVICE (local tokens / "
        "(time * non_data_parallel_size)); printed with thousands separators ('7,034') and ANSI colours "
        "(ESC[34mtps: ...). '[rank0]:' prefix comes from torchrun --tee/--local-ranks-filter in run_train.sh. "
        "Step 1 includes warmup/compile. The 'validate step' line also has tps and must be ignored.",
    )

    text, rates = gen_megatron()
    files["megatron.log"] = text
    exp["megatron.log"] = dict(
        unit="samples",
        per="job",
        live_rates=rates,
        final=None,
        ignored_lines=["validation loss at iteration"],
        notes="Megatron training_log: rate = global batch size / (elapsed time per iteration (ms)/1000). "
        "'elapsed time per iteration' is averaged over the log interval (10 iters). "
        "'throughput per GPU (TFLOP/s/GPU)' is per GPU (divided by world_size). First interval includes init. "
        "Line printed by print_rank_last (last rank).",
    )

    text, rates = gen_deepspeed()
    files["deepspeed.log"] = text
    exp["deepspeed.log"] = dict(
        unit="samples",
        per="job",
        live_rates=rates,
        final=None,
        ignored_lines=["log_dist] [Rank 0] step=", "time (ms) |"],
        notes="DeepSpeed ThroughputTimer (steps_per_print=10, wall_clock_breakdown=true): CurrSamplesPerSec = "
        "train_batch_size (global: micro_bs*grad_accum*dp_world) / duration of the LAST global step; "
        "RunningAvgSamplesPerSec = average since step start_step=2. Full float repr (no rounding). "
        "The timer logs with logger.info with no rank filter, so on multi-GPU every rank prints its own line "
        "(each already job-wide: do not sum).",
    )

    for name, text in files.items():
        write(name, text)
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(exp, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
