"""What a sample costs here (seed 000: choose a GPU by what it does per dollar).

With ``--price USD_PER_HOUR``: the cost of a million samples of each standard workload
and of a PFLOP-hour of dense bf16 matmul, from what this machine measured.
"""

from __future__ import annotations

from gputui.check.model import COST, INFO, CheckResult, skipped

# check id suffix of a measured rate -> what one million of its samples are called
_PER_MILLION = {"resnet50_tuned": "images", "bert_large_tuned": "sequences"}


def cost_per_million(price_per_hour: float, samples_per_sec: float) -> float:
    return price_per_hour / (samples_per_sec * 3600.0) * 1e6


def cost_per_pflop_hour(price_per_hour: float, tflops: float) -> float:
    """A PFLOP-hour is 1 PFLOP/s for an hour: at ``tflops`` it takes 1000/tflops hours."""
    return price_per_hour * 1000.0 / tflops


def cost_results(results: list[CheckResult], price_per_hour: float | None) -> list[CheckResult]:
    if price_per_hour is None:
        return [skipped("cost", COST, "Cost per sample", "no price given: add --price USD_PER_HOUR")]
    out = []
    for result in results:
        if not isinstance(result.value, (int, float)) or result.value <= 0:
            continue
        suffix = result.id.rsplit(".", 1)[-1]
        if suffix in _PER_MILLION:
            what = _PER_MILLION[suffix]
            out.append(
                CheckResult(
                    id=f"cost.{suffix}",
                    group=COST,
                    name=f"Cost per million {what} ({result.name})",
                    status=INFO,
                    value=round(cost_per_million(price_per_hour, result.value), 4),
                    unit="USD",
                    gpu=result.gpu,
                    detail=f"at {result.value:,.0f} {result.unit} and {price_per_hour:g} USD/hour",
                )
            )
        elif suffix == "matmul_bf16" and not any(c.id == "cost.pflop_hour_bf16" for c in out):  # the first GPU's
            out.append(
                CheckResult(
                    id="cost.pflop_hour_bf16",
                    group=COST,
                    name="Cost per PFLOP-hour (dense bf16 matmul)",
                    status=INFO,
                    value=round(cost_per_pflop_hour(price_per_hour, result.value), 4),
                    unit="USD",
                    gpu=result.gpu,
                    detail=f"at {result.value:,.0f} TFLOP/s and {price_per_hour:g} USD/hour (one GPU)",
                )
            )
    if not out:
        out.append(skipped("cost", COST, "Cost per sample", "nothing was measured to put a price on"))
    return out
