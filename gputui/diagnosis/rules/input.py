"""Input-bound: the GPU waits for data the CPU prepares.

Two ways to see it.  With the probe in a PyTorch job, directly: the share of its time
the training loop spent inside the DataLoader waiting for the next batch.  Without it
(gputui's own workloads, ``--pid``, other frameworks), from the outside: the GPU
under-busy while the processes that load the data are saturated."""

from __future__ import annotations

from gputui.diagnosis.context import Context, med, rnd
from gputui.diagnosis.rules.base import Description, Observation, Rule, RuleFinding, clean, mean, percent
from gputui.diagnosis.rules.gpu_busy import THROUGHPUT, known_ceiling, main_signal, read_busy, readable, signal_evidence, title_of
from gputui.model import GpuSample
from gputui.record.events import Evidence


class InputBound(Rule):
    kind = "input_bound"
    scope = "run"
    needs = "a GPU's activity, or the probe's data wait (a PyTorch job run as `gputui -- python ...`)"

    def lacking(self, ctx: Context) -> str | None:
        return None if ctx.probe else super().lacking(ctx)  # the probe's data wait needs no GPU

    def observe(self, ctx: Context, gpu: GpuSample | None) -> Observation:
        wait = ctx.data_wait_share()
        if wait is not None:
            return self._from_data_wait(ctx, wait)
        s = ctx.settings
        if ctx.setting("pipeline") == "synthetic" or not ctx.run_uses_gpu:
            return Observation(None, {})  # the data lives on the GPU (or no GPU is used): nothing to wait for
        d = ctx.derived
        gpus = d.run_gpus
        if not gpus or not d.procs:
            return Observation(None, {})
        busy = read_busy(ctx, gpus, sm_below=s.input_sm_active_pct, util_below=s.input_util_pct)
        under = bool(busy.signals) if readable(busy) else None
        rate = ctx.recent_rate()
        ceiling = known_ceiling(ctx)
        slow = (rate < ceiling * s.ceiling_below_pct / 100.0) if ceiling and rate is not None else None
        if slow:
            busy.signals.append(THROUGHPUT)
        if under is None and slow is None:
            return Observation(None, {})
        host = ctx.host
        host_cpu = host.cpu_percent if host else None
        worker_cpu = mean([p.cpu_percent for p in d.workers if p.cpu_percent is not None])
        main_cpu = d.main.cpu_percent if d.main else None
        by = {
            "by_workers": bool(d.workers) and worker_cpu is not None and worker_cpu >= s.worker_busy_pct,
            "by_cores": bool(ctx.cores and d.run_cpu is not None and d.run_cpu >= s.run_cores_busy_pct * ctx.cores),
            "by_host": host_cpu is not None and host_cpu >= s.run_cores_busy_pct,
            "by_main": not d.workers and main_cpu is not None and main_cpu >= s.worker_busy_pct,
        }
        level = 2 if (under or slow) and any(by.values()) else 0
        obs = {
            **busy.obs(),
            "rate": rate,
            "workers": float(len(d.workers)),
            "worker_cpu": worker_cpu,
            "run_cpu": d.run_cpu,
            "host_cpu": host_cpu,
            "main_cpu": main_cpu,
            **{k: float(v) for k, v in by.items()},
        }
        return Observation(level, obs)

    def _from_data_wait(self, ctx: Context, wait: float) -> Observation:
        """The probe's view: the loop waited for data this share of its time.  A GPU
        that is busy all the same (its queue runs ahead of the loop) clears it."""
        s, d = ctx.settings, ctx.derived
        busy = read_busy(ctx, d.run_gpus, sm_below=s.input_sm_active_pct, util_below=s.input_util_pct) if d.run_gpus and ctx.run_uses_gpu else None
        gpu_fed = busy is not None and readable(busy) and not busy.signals
        level = 2 if wait * 100.0 >= s.data_wait_pct and not gpu_fed else 0
        workers = ctx.probe_workers()
        obs = {
            **(busy.obs() if busy is not None else {}),
            "data_wait": 100.0 * wait,
            "workers": float(workers if workers is not None else len(d.workers)),
            "worker_cpu": mean([p.cpu_percent for p in d.workers if p.cpu_percent is not None]),
            "main_cpu": d.main.cpu_percent if d.main else None,
            "run_cpu": d.run_cpu,
            "rate": ctx.recent_rate(),
        }
        return Observation(level, obs)

    def _describe_data_wait(self, f: RuleFinding, ctx: Context) -> Description:
        wait, workers = med(f.series("data_wait")), int(max(f.series("workers"), default=0))
        worker_cpu, main_cpu = med(f.series("worker_cpu")), med(f.series("main_cpu"))
        sm, util = med(f.series("sm_active")), med(f.series("util_gpu"))
        cores, gpus = ctx.cores, ctx.n_gpus
        evidence = clean(
            {
                "data_wait_pct": rnd(wait),
                "workers": workers,
                "worker_cpu_pct": rnd(worker_cpu),
                "main_cpu_pct": rnd(main_cpu),
                "gpu_sm_active_pct": rnd(sm),
                "gpu_util_pct": rnd(util),
                "cores": cores,
                "gpus": ctx.n_gpus,
                "rate": rnd(f.rate(), 1),
                "rate_unit": ctx.rate_unit,
                "duration_s": rnd(f.until - f.since),
                "source": "probe, sampling the loop's stack (no DataLoader)" if ctx.probe_sampled else "probe",
                "data_site": ctx.probe_site,
            }
        )
        if ctx.probe_sampled:
            return self._describe_own_batches(ctx, wait, sm, util, evidence)
        if workers:
            who = f"{workers} DataLoader worker{'s' if workers != 1 else ''}" + (f" at {worker_cpu:.0f}% of a core each" if worker_cpu is not None else "")
        else:
            who = "no DataLoader workers: the main process loads every batch" + (f" at {main_cpu:.0f}% of a core" if main_cpu is not None else "")
        title = f"Input-bound: the training loop waited for data in {wait:.0f}% of its time; {who}"
        if sm is not None or util is not None:
            title += f"; GPU {'SM activity' if sm is not None else 'utilization'} {sm if sm is not None else util:.0f}%"
        advice = []
        if cores and gpus:
            if workers < cores / gpus:
                advice.append(f"Raise DataLoader(num_workers=...) ({workers} now; this machine has {cores:g} cores for {gpus} GPU(s): 4-8 workers per GPU).")
            else:
                advice.append(
                    f"Every core already has a worker ({cores:g} cores for {gpus} GPU(s)): make each sample cheaper to load, or rent a machine with more cores."
                )
        elif cores:  # no GPU: the training itself runs on the same cores as the workers
            if workers < cores:
                advice.append(
                    f"Raise DataLoader(num_workers=...) ({workers} now; this machine has {cores:g} cores, which training on the CPU shares with the workers)."
                )
            else:
                advice.append(f"Every core already has a worker ({cores:g} cores): make each sample cheaper to load, or rent a machine with more cores.")
        advice += [
            "Cache decoded and resized samples (a pre-processed copy of the dataset) so each epoch decodes less.",
            "Overlap loading with training: DataLoader(pin_memory=True, persistent_workers=True, prefetch_factor=4).",
            "Decode and augment on the GPU with NVIDIA DALI, or augment whole batches on the GPU (torchvision.transforms.v2 on CUDA tensors).",
        ]
        return Description(title, evidence, advice)

    def _describe_own_batches(self, ctx: Context, wait: float | None, sm: float | None, util: float | None, evidence: Evidence) -> Description:
        """The loop makes its own batches (nanoGPT's get_batch()): the probe's sampler saw
        it doing so, not waiting on a DataLoader."""
        where = f" in {ctx.probe_site}" if ctx.probe_site else ""
        title = f"Input-bound: the training loop spent {wait:.0f}% of its time making its own batches{where}, with no DataLoader"
        if sm is not None or util is not None:
            title += f"; GPU {'SM activity' if sm is not None else 'utilization'} {sm if sm is not None else util:.0f}%"
        advice = [
            "Make batches off the loop: wrap the batch making in an IterableDataset and iterate a DataLoader(num_workers=4, pin_memory=True), so workers prepare the next batches while the GPU trains.",
            "Do the expensive part once, before training: tokenize or decode the corpus into a flat file (nanoGPT's prepare.py writes train.bin; get_batch then only slices a np.memmap).",
            "Or move the per-batch work onto the GPU, as whole-batch tensor operations.",
        ]
        return Description(title, evidence, advice)

    def describe(self, f: RuleFinding, ctx: Context) -> Description:
        if f.series("data_wait"):
            return self._describe_data_wait(f, ctx)
        sm, util = med(f.series("sm_active")), med(f.series("util_gpu"))
        workers = max(f.series("workers"), default=0)
        worker_cpu, run_cpu = med(f.series("worker_cpu")), med(f.series("run_cpu"))
        host_cpu, main_cpu = med(f.series("host_cpu")), med(f.series("main_cpu"))
        cores, gpus = ctx.cores, ctx.n_gpus
        rate = f.rate()
        ceiling = known_ceiling(ctx)
        power_pct, clock_pct = med(f.series("power_pct")), med(f.series("clock_pct"))
        signal = main_signal(f)
        evidence = clean(
            {
                "gpu_sm_active_pct": rnd(sm),
                "gpu_util_pct": rnd(util),
                "gpu_power_pct_of_limit": rnd(power_pct) if sm is None else None,
                "gpu_sm_clock_pct_of_max": rnd(clock_pct) if sm is None else None,
                **signal_evidence(f),
                "workers": int(workers),
                "worker_cpu_pct": rnd(worker_cpu),
                "main_cpu_pct": rnd(main_cpu),
                "run_cpu_pct": rnd(run_cpu),
                "host_cpu_pct": rnd(host_cpu),
                "cores": cores,
                "gpus": ctx.n_gpus,
                "samples_per_sec": rnd(rate, 1),
                "ceiling_samples_per_sec": ceiling,
                "ceiling_pct": rnd(percent(rate, ceiling)) if ceiling else None,
                "duration_s": rnd(f.until - f.since),
            }
        )
        busy = title_of(signal, sm, util, power_pct, clock_pct)
        causes = {k: f.share(k) or 0.0 for k in ("by_workers", "by_cores", "by_host", "by_main")}
        cause = max(causes, key=lambda k: causes[k])
        if cause == "by_workers":
            plural = "worker runs" if workers == 1 else "workers run"
            title = f"Input-bound: GPU {busy} while {workers:.0f} data-loader {plural} at {worker_cpu:.0f}% of a core"
        elif cause == "by_cores":  # it had samples with the run's CPU, so its median is there
            title = f"Input-bound: GPU {busy} while the run uses {(run_cpu or 0.0) / 100:.1f} of {cores} CPU cores"
        elif cause == "by_host":
            title = f"Input-bound: GPU {busy} while the machine's CPU is {host_cpu:.0f}% busy"
        else:
            title = f"Input- or Python-bound: GPU {busy} while the main process runs at {main_cpu:.0f}% of a core, with no data-loader workers"
        if ceiling and rate is not None:
            title += f"; {rate:.0f} samples/s is {100 * rate / ceiling:.0f}% of the {ceiling:.0f} this model reaches here"
        advice = []
        per_gpu = cores / gpus if cores and gpus else None  # no GPU: no cores per GPU to count
        if cause == "by_main":
            advice.append(
                "The main process loads the data itself: start data-loader workers (PyTorch DataLoader(num_workers=...), tf.data map(num_parallel_calls=AUTOTUNE))."
            )
            advice.append(
                "Or the loop itself is the limit (small batches, .item() every step): run a PyTorch job as `gputui -- python train.py ...`, whose probe measures how long the loop waits for data, to tell the two apart."
            )
        if per_gpu is not None and per_gpu < 4:
            advice.append(
                f"This machine has {cores:g} CPU cores for {gpus} GPU(s), fewer than the 4-8 cores a GPU needs (AutoDL guide): more workers will not help much; do less work per sample or rent a machine with more cores."
            )
        elif cores and not gpus:
            advice.append(
                f"Use more data-loader workers ({workers:.0f} now; this machine has {cores:g} cores, which training on the CPU shares with the workers)."
            )
        else:
            have = f"{cores:g} cores for {gpus} GPU(s)" if cores else "the machine's cores"
            advice.append(
                f"Use more data-loader workers ({workers:.0f} now; {have}): give each GPU 4-8 cores (AutoDL guide); past that, Python multiprocessing overhead dominates."
            )
        advice += [
            "Cache decoded and resized samples (tf.data .cache(), or a pre-processed copy of the dataset) so each epoch decodes less.",
            "Prefetch so loading overlaps training: DataLoader(pin_memory=True, persistent_workers=True, prefetch_factor=4), tf.data .prefetch(AUTOTUNE).",
            "Lighten the CPU augmentation, or apply it to whole batches on the GPU (torchvision.transforms.v2 on CUDA tensors, Kornia).",
            "Decode and augment on the GPU with NVIDIA DALI: one core with DALI beat an 8-core Python loader (AutoDL guide).",
        ]
        return Description(title, evidence, advice)
