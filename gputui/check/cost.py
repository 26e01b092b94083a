"""What a sample costs here (seed 000: choose a GPU by what it does per dollar).

With ``--price USD_PER_HOUR`` (what the instance costs): the cost of a million samples of
each standard workload and of a PFLOP-hour of dense bf16 matmul on one of its GPUs, from
what this machine measured.
"""

from __future__ import annotations

from gputui.check.result import COST, INFO, CheckResult, skipped

# check id suffix of a measured rate -> what one million of its samples are called
_PER_MILLION = {"resnet50_tuned": "images", "bert_large_tuned": "sequences"}


def cost_per_million(price_per_hour: float, samples_per_sec: float) -> float:
    return price_per_hour / (samples_per_sec * 3600.0) * 1e6


def cost_per_pflop_hour(price_per_hour: float, tflops: float) -> float:
    """A PFLOP-hour is 1 PFLOP/s for an hour: at ``tflops`` it takes 1000/tflops hours."""
    return price_per_hour * 1000.0 / tflops


def cost_results(results: list[CheckResult], price_per_hour: float | None, gpus_priced: int = 1) -> list[CheckResult]:
    """Each cost is per GPU: ``price_per_hour`` is what the whole instance costs, split
    evenly over its ``gpus_priced`` GPUs. The workloads run on one GPU, and an 8-GPU box
    at 8 times the price of one GPU should cost the same per sample, not 8 times more
    (it does, if every GPU runs a copy or the job scales linearly)."""
    if price_per_hour is None:
        return [skipped("cost", COST, "Cost per sample", "no price given: add --price USD_PER_HOUR")]
    gpus_priced = max(1, gpus_priced)  # no GPU seen: the price is the host's
    price_per_gpu = price_per_hour / gpus_priced
    priced = f"{price_per_hour:g} USD/hour" + (f" for {gpus_priced} GPUs ({price_per_gpu:g} each)" if gpus_priced > 1 else "")
    # (result, what it measured: the last part of its id, its rate)
    measured = [(r, r.id.rsplit(".", 1)[-1], float(r.value)) for r in results if isinstance(r.value, (int, float)) and r.value > 0]
    out = []
    for result, suffix, rate in measured:
        if suffix in _PER_MILLION:
            what = _PER_MILLION[suffix]
            out.append(
                CheckResult(
                    id=f"cost.{suffix}",
                    group=COST,
                    name=f"Cost per million {what} ({result.name})",
                    status=INFO,
                    value=round(cost_per_million(price_per_gpu, rate), 4),
                    unit="USD",
                    gpu=result.gpu,
                    detail=f"at {rate:,.0f} {result.unit} and {priced}",
                )
            )
    matmuls = [rate for _, suffix, rate in measured if suffix == "matmul_bf16"]
    if matmuls:  # the GPUs measured, on average: what one GPU of this box does
        tflops = sum(matmuls) / len(matmuls)
        over = f" (the mean of {len(matmuls)} GPUs)" if len(matmuls) > 1 else ""
        out.append(
            CheckResult(
                id="cost.pflop_hour_bf16",
                group=COST,
                name="Cost per PFLOP-hour (dense bf16 matmul)",
                status=INFO,
                value=round(cost_per_pflop_hour(price_per_gpu, tflops), 4),
                unit="USD",
                detail=f"at {tflops:,.0f} TFLOP/s per GPU{over} and {priced}",
            )
        )
    if not out:
        out.append(skipped("cost", COST, "Cost per sample", "nothing was measured to put a price on"))
    return out
