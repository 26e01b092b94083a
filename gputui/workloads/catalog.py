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


MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        ModelSpec("resnet50", "cnn", "ResNet-50", image_size=224),
        ModelSpec("mobilenetv2", "cnn", "MobileNetV2", image_size=224),
        ModelSpec("efficientnet_b0", "cnn", "EfficientNet-B0", image_size=224),
        ModelSpec("efficientnet_b3", "cnn", "EfficientNet-B3", image_size=300),
        ModelSpec("efficientnet_b7", "cnn", "EfficientNet-B7", image_size=600),
        ModelSpec("distilbert", "transformer", "DistilBERT (base, uncased)", seq_len=128),
        ModelSpec("bert_large", "transformer", "BERT-large (uncased)", seq_len=128),
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
