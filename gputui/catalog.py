"""What the benchmark worker can run, without importing any ML framework.

Preset validation and the dashboard read this table; the framework modules of the
benchmark worker (``gputui.workloads``, child-only code) build the models named here.
A core module that imports nothing of gputui (import-linter:
``protocol-and-catalog-are-leaves``), so the worker can read it too.
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
    # counts other sizes at run time).  tests/workloads/test_workloads_torch.py checks the table.
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

# The transformers' hyperparameters, spelled out from bert-large-uncased's and
# distilbert-base-uncased's config.json (weights and configs cannot be downloaded).
# Both frameworks build their models from these; each adds its own pad_token_id.
TRANSFORMER_CONFIGS: dict[str, dict] = {
    "bert_large": dict(
        vocab_size=30522, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096,
        hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, max_position_embeddings=512,
        type_vocab_size=2, initializer_range=0.02, layer_norm_eps=1e-12, position_embedding_type="absolute",
    ),
    "distilbert": dict(
        vocab_size=30522, max_position_embeddings=512, sinusoidal_pos_embds=False, n_layers=6, n_heads=12, dim=768,
        hidden_dim=3072, dropout=0.1, attention_dropout=0.1, activation="gelu", initializer_range=0.02,
        qa_dropout=0.1, seq_classif_dropout=0.2,
    ),
}  # fmt: skip
