"""Regenerate the fixtures of how a run's figure is read (SOURCES.md, "Reading the run's
figure"): datasets' start-up bars before a Trainer run, a tqdm loop that speeds up,
Lightning's bars with a slow start and its test and predict loops, a Trainer whose
evaluation bar is longer than its training bar, timm's train.py over two epochs, and a
nanoGPT fork that prints its own tok/s.

Every bar is drawn by tqdm's own code (the installed tqdm) on a fake clock, with the
arguments the tool passes (copied from its source, named beside each); the Trainer's
bars by transformers' own ProgressCallback (the installed transformers); timm's and the
nanoGPT fork's lines are their format strings, filled in.  make_fixtures.py provides the
fake clock and terminal.

Run:  python tests/data/progress/make_reading_fixtures.py
"""

from __future__ import annotations

import json
import math
import os
import sys
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from make_fixtures import CLOCK, Term, restore, setup_tqdm, write  # noqa: E402

# Lightning's TQDMProgressBar (lightning/pytorch/callbacks/progress/tqdm_progress.py).
LIGHTNING_BAR_FORMAT = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_noinv_fmt}{postfix}]"


def lightning_tqdm(tqdm_cls):
    """Lightning's Tqdm subclass: format_num pads floats to five characters."""

    class Tqdm(tqdm_cls):
        @staticmethod
        def format_num(n):
            should_be_padded = isinstance(n, (float, str))
            if not isinstance(n, str):
                n = tqdm_cls.format_num(n)
            if should_be_padded and "e" not in n:
                if "." not in n and len(n) < 5:
                    try:
                        float(n)
                    except ValueError:
                        return n
                    n += "."
                n += "0" * (5 - len(n))
            return n

    return Tqdm


def trainer_run(tqdm_cls, *, max_steps, step_s, eval_every, eval_batches, eval_s):
    """A Trainer run drawn by transformers' ProgressCallback (trainer_callback.py): its
    training bar, its evaluation bar (``leave=self.training_bar is None``), its logging
    dicts through ``training_bar.write``, and the final speed_metrics dict.  Returns the
    Trainer's own train_steps_per_second (steps over its runtime)."""
    import transformers.trainer_callback as trainer_callback

    trainer_callback.tqdm = tqdm_cls  # the callback's module-level tqdm, on the fake clock
    callback = trainer_callback.ProgressCallback()
    args = SimpleNamespace()
    state = SimpleNamespace(is_world_process_zero=True, max_steps=max_steps, global_step=0)
    start = CLOCK()
    callback.on_train_begin(args, state, None)
    for step in range(1, max_steps + 1):
        CLOCK.adv(step_s(step))
        state.global_step = step
        callback.on_step_end(args, state, None)
        if step % 20 == 0:
            callback.on_log(
                args,
                state,
                None,
                logs={"loss": round(2.9 * math.exp(-step / 150) + 0.35, 4), "learning_rate": 5e-05 * (1 - step / max_steps), "epoch": step / 40},
            )
        if step % eval_every == 0:
            loader = [None] * eval_batches
            for _ in loader:
                CLOCK.adv(eval_s)
                callback.on_prediction_step(args, state, None, eval_dataloader=loader)
            callback.on_evaluate(args, state, None)
            callback.on_log(args, state, None, logs={"eval_loss": 0.61, "eval_runtime": round(eval_batches * eval_s, 4), "epoch": step / 40})
    runtime = CLOCK() - start
    steps_per_second = round(max_steps / runtime, 3)
    callback.on_log(
        args,
        state,
        None,
        logs={
            "train_runtime": round(runtime, 4),
            "train_samples_per_second": round(32 * max_steps / runtime, 3),
            "train_steps_per_second": steps_per_second,
            "train_loss": 0.98,
            "epoch": 3.0,
        },
    )
    callback.on_train_end(args, state, None)
    return steps_per_second


def gen_datasets_then_trainer():
    """datasets' start-up bars, transformers' and the hub's loading bars, then a Trainer run."""
    term = Term()
    tqdm = setup_tqdm(term)
    # datasets utils/file_utils.py fsspec_get: desc "Downloading data" (DownloadManager's
    # download_desc), unit="B", unit_scale=True.
    bar = tqdm(total=7_439_277, unit="B", unit_scale=True, desc="Downloading data")
    for _ in range(4):
        CLOCK.adv(0.06)
        bar.update(1_859_819)
    bar.update(1)
    bar.close()
    # download_manager.py: map_nested(..., desc="Downloading data files"), then
    # "Extracting data files"; py_utils.map_nested draws hf_tqdm(iterable, desc=desc).
    for desc, seconds in (("Downloading data files", 0.5), ("Extracting data files", 0.001)):
        for _ in tqdm(range(3), desc=desc):
            CLOCK.adv(seconds)
    # builder.py: hf_tqdm(unit=" examples", total=split_info.num_examples, desc=f"Generating {split} split");
    # a dataset never prepared has no num_examples yet: the bar without a total.
    for split, total, known in (("train", 3668, False), ("validation", 408, True), ("test", 1725, True)):
        bar = tqdm(unit=" examples", total=total if known else None, desc=f"Generating {split} split")
        for _ in range(4):
            CLOCK.adv(0.0096 * total / 1000)
            bar.update(total // 4)
        bar.update(total - 4 * (total // 4))
        bar.close()
    # arrow_dataset.py Dataset.map: hf_tqdm(unit=" examples", initial=..., total=...,
    # desc=(desc or "Map") + (f" (num_proc={num_proc})" if num_proc ...)); filter passes desc or "Filter".
    for desc in ("Map", "Map (num_proc=4)", "Filter", "Running tokenizer on dataset", "Grouping texts in chunks of 1024"):
        bar = tqdm(unit=" examples", initial=0, total=3668, desc=desc)
        for _ in range(4):
            CLOCK.adv(0.07)
            bar.update(917)
        bar.close()
    # transformers modeling_utils.py: logging.tqdm(total=len(args_list), desc="Loading checkpoint shards");
    # huggingface_hub _snapshot_download.py: thread_map(..., desc=f"Fetching {len(filtered_repo_files)} files").
    for desc, n, seconds in (("Fetching 4 files", 4, 0.4), ("Loading checkpoint shards", 2, 0.66)):
        for _ in tqdm(range(n), desc=desc):
            CLOCK.adv(seconds)
    own = trainer_run(tqdm, max_steps=345, step_s=lambda step: 0.0372 + 0.0011 * (step % 3), eval_every=115, eval_batches=26, eval_s=0.021)
    restore()
    return term.getvalue(), own


def gen_tqdm_speedup():
    """A plain tqdm loop that doubles its speed halfway: tqdm(total=1200, desc="train")."""
    term = Term()
    tqdm = setup_tqdm(term)
    bar = tqdm(total=1200, desc="train")
    for i in range(1200):
        CLOCK.adv(0.047 if i < 600 else 0.0235)
        bar.update(1)
    bar.close()
    restore()
    return term.getvalue()


def gen_lightning_slow_start():
    """Lightning's TQDMProgressBar(refresh_rate=1) over two epochs whose first twenty
    batches load slowly, then trainer.test and trainer.predict: init_train_tqdm
    (leave=True, smoothing=0: the rate is the epoch's average), init_validation_tqdm
    (position 1, leave=False), on_validation_end and on_train_epoch_end (set_postfix on
    the training bar), init_test_tqdm (desc "Testing"), init_predict_tqdm.  Returns each
    epoch's batches and the training bar's elapsed time at its last redraw."""
    term = Term()
    Tqdm = lightning_tqdm(setup_tqdm(term))
    kw = dict(dynamic_ncols=True, file=sys.stdout, bar_format=LIGHTNING_BAR_FORMAT)
    train = Tqdm(desc="Training", position=0, leave=True, smoothing=0, **kw)
    epochs = []
    for epoch in range(2):
        train.reset(60)
        train.initial = 0
        train.set_description(f"Epoch {epoch}")
        began = CLOCK()
        for b in range(60):
            CLOCK.adv(0.5 if epoch == 0 and b < 20 else 0.05)
            train.n = b + 1
            train.refresh()
            train.set_postfix({"v_num": 0, "train_loss": round(2.0 - 0.01 * (epoch * 60 + b), 3)})
        val = Tqdm(desc="Validation", position=1, leave=False, **kw)
        val.reset(20)
        val.initial = 0
        val.set_description("Validation DataLoader 0")
        for b in range(20):
            CLOCK.adv(0.02)
            val.n = b + 1
            val.refresh()
        train.set_postfix({"v_num": 0, "train_loss": 1.0, "val_loss": 0.7})  # on_validation_end
        val.close()
        train.set_postfix({"v_num": 0, "train_loss": 1.0, "val_loss": 0.7})  # on_train_epoch_end
        epochs.append((60, CLOCK() - began))
    train.close()
    for desc in ("Testing", "Predicting"):
        bar = Tqdm(desc=desc, position=0, leave=True, smoothing=0 if desc == "Predicting" else 0.3, **kw)
        bar.reset(40)
        bar.initial = 0
        bar.set_description(f"{desc} DataLoader 0")
        for b in range(40):
            CLOCK.adv(0.01)
            bar.n = b + 1
            bar.refresh()
        bar.close()
    restore()
    return term.getvalue(), epochs


def gen_trainer_long_eval():
    """A Trainer whose evaluation set has more batches than the run has steps."""
    term = Term()
    tqdm = setup_tqdm(term)
    own = trainer_run(tqdm, max_steps=60, step_s=lambda step: 0.251 + 0.004 * (step % 2), eval_every=30, eval_batches=150, eval_s=0.012)
    restore()
    return term.getvalue(), own


def gen_timm_epochs():
    """timm train.py (huggingface/pytorch-image-models@aa4b585) over two epochs of 201
    updates, logged every 50 and at the last batch, with validate()'s lines between."""
    lines = []
    gbs, updates = 1024, 201
    samples = seconds = 0.0
    for epoch in range(2):
        total = count = 0.0
        for idx in range(updates):
            t = 1.842 if idx == 0 else (0.298, 0.302, 0.306)[idx % 3] + (0.05 if 100 <= idx < 130 else 0.0)
            total += t
            count += 1
            samples += gbs
            seconds += t
            if idx % 50 == 0 or idx == updates - 1:
                avg = total / count
                lines.append(
                    f"Train: {epoch} [{idx:>4d}/{updates} "
                    f"({100.0 * (idx + 1) / updates:>3.0f}%)]  "
                    f"Loss: {6.91 - 0.002 * idx:#.3g} ({6.91 - 0.001 * idx:#.3g})  "
                    f"Time: {t:.3f}s, {gbs / t:>7.2f}/s  "
                    f"({avg:.3f}s, {gbs / avg:>7.2f}/s)  "
                    f"LR: {1e-6 + 1e-3 * idx / updates:.3e}  "
                    f"Data: {0.011:.3f} ({0.014:.3f})"
                )
        for bi in (0, 48):
            lines.append(
                f"Test: [{bi:>4d}/48]  Time: {0.093:.3f} ({0.110:.3f})  Loss: {5.402:>7.3f} ({5.311:>6.3f})  Acc@1: {5.469:>7.3f} ({6.120:>7.3f})  Acc@5: {17.969:>7.3f} ({18.302:>7.3f})"
            )
    return "\n".join(lines) + "\n", samples / seconds


def gen_nanogpt_toks():
    """A nanoGPT fork's train loop (code index, file id 32179877100):
    print(f"tokens per iteration will be: {tokens_per_iter:,}") and
    print(f"iter {iter_num}: loss {loss:.4f}, time {dt*1000:.2f}ms, tok/s {running_tok_per_s:,.0f}"),
    running_tok_per_s an EMA (0.9 / 0.1) of tokens_per_iter / dt."""
    tokens_per_iter = 8 * 4 * 12 * 1024
    lines = [f"tokens per iteration will be: {tokens_per_iter:,}"]
    running = None
    rates = []
    for iter_num in range(0, 200, 10):
        dt = 1.6 if iter_num == 0 else 0.40 + 0.01 * (iter_num % 3)
        tok = tokens_per_iter / dt
        running = tok if running is None else 0.9 * running + 0.1 * tok
        lines.append(f"iter {iter_num}: loss {10.9 - 0.02 * iter_num:.4f}, time {dt * 1000:.2f}ms, tok/s {running:,.0f}")
        rates.append(float(f"{running:.0f}"))
        if iter_num and iter_num % 100 == 0:
            lines.append(f"step {iter_num}: train loss {9.1:.4f}, val loss {9.2:.4f}")
    return "\n".join(lines) + "\n", rates


def main():
    truth = {}
    text, truth["datasets_then_trainer.log"] = gen_datasets_then_trainer()
    write("datasets_then_trainer.log", text)
    write("tqdm_speedup.log", gen_tqdm_speedup())
    text, epochs = gen_lightning_slow_start()
    write("lightning_slow_start.log", text)
    truth["lightning_slow_start.log"] = sum(n for n, _ in epochs) / sum(s for _, s in epochs)
    text, truth["trainer_long_eval.log"] = gen_trainer_long_eval()
    write("trainer_long_eval.log", text)
    text, truth["timm_train_epochs.log"] = gen_timm_epochs()
    write("timm_train_epochs.log", text)
    text, rates = gen_nanogpt_toks()
    write("nanogpt_toks.log", text)
    truth["nanogpt_toks.log"] = rates
    print(json.dumps(truth, indent=2))


if __name__ == "__main__":
    main()
