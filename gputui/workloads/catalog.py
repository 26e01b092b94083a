"""What the benchmark worker can run, without importing any ML framework.

Preset validation and the dashboard read this table; the framework modules build
the models named here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelSpec:
    name: str
    kind: str  # "cnn", "transformer" or "cpu"
    title: str
    image_size: int | None = None  # input side in pixels for CNNs
    seq_len: int | None = None  # default sequence length for transformers
    # Training FLOPs (forward + backward) of one sample at the default image_size /
    # seq_len, as the PyTorch workload counts them (FlopCounterMode on the meta device,
    # matmul/conv/attention only; see torch_workload.count_train_flops, which also
    # counts other sizes at run time).  tests/test_workloads_torch.py checks the table.
    train_flops: float | None = None


MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec("resnet50", "cnn", "ResNet-50", image_size=224, train_flops=24.2991e9),
        ModelSpec("mobilenetv2", "cnn", "MobileNetV2", image_size=224, train_flops=1.78297e9),
        ModelSpec("efficientnet_b0", "cnn", "EfficientNet-B0", image_size=224, train_flops=2.29321e9),
        ModelSpec("efficientnet_b3", "cnn", "EfficientNet-B3", image_size=300, train_flops=10.9142e9),
        ModelSpec("efficientnet_b7", "cnn", "EfficientNet-B7", image_size=600, train_flops=226.164e9),
        ModelSpec("distilbert", "transformer", "DistilBERT (base, uncased)", seq_len=128, train_flops=33.5244e9),
        ModelSpec("bert_large", "transformer", "BERT-large (uncased)", seq_len=128, train_flops=236.766e9),
        ModelSpec("spin", "cpu", "Pure-Python CPU loop (smoke test, no ML framework)"),
    )
}

# Which models and precisions each framework offers.  "smoke" needs nothing installed.
FRAMEWORKS: dict[str, dict[str, tuple[str, ...]]] = {
    "smoke": {"models": ("spin",), "precisions": ("fp32",)},
    "torch": {
        "models": tuple(n for n, s in MODELS.items() if s.kind != "cpu"),
        "precisions": ("fp32", "tf32", "bf16", "fp16"),
    },
    "tf": {
        "models": tuple(n for n, s in MODELS.items() if s.kind != "cpu"),
        "precisions": ("fp32", "mixed_float16", "mixed_bfloat16"),
    },
}

PIPELINES = ("synthetic", "host")
METHODS = ("steps", "tf-metal")  # gputui's step timing, or tf-metal-experiments' epochs
AUGMENT_LEVELS = ("light", "heavy")  # host pipeline: per-image CPU work
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")  # torch.compile
DEVICES = ("auto", "cuda", "cpu")  # auto: cuda when available, else cpu
