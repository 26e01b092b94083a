"""The Keras models of the TensorFlow workload and their training FLOPs.

Models (random weights, built from code; nothing is downloaded), as tf-metal-experiments'
``model_library.py`` builds them:

* CNNs from ``tf_keras.applications`` (``weights=None``, ``include_top=False``, all
  layers trainable) + global average pooling + a Dense head of 8 classes: resnet50,
  mobilenetv2, efficientnet_b0/b3/b7 at 224/224/224/300/600 px (or ``--image-size``);
  plain ``SGD()`` (Keras defaults), like train_benchmark.py.
* Transformers: ``TFDistilBertForSequenceClassification`` /
  ``TFBertForSequenceClassification`` from a config with the standard hyperparameters of
  ``distilbert-base-uncased`` and ``bert-large-uncased``
  (``gputui.catalog.TRANSFORMER_CONFIGS``), 8 labels, sequence length 128 (or
  ``--seq-len``); ``Adam()`` (Keras defaults), like train_benchmark.py.

FLOPs per sample (training = forward + backward), the convention of the PyTorch
workload (matmul/conv/attention only, 2 FLOPs per multiply-add): CNNs are counted by
walking the built Keras model (Conv2D, DepthwiseConv2D, Dense at their real input and
output shapes); backward costs twice the forward (input and weight gradients), except
for the stem convolution, whose input (the image) needs no gradient.  Transformers
are counted from their configuration (projections, feed-forward, attention scores and
weighted sums, pooler/pre-classifier and classifier on the [CLS] token), times 3.
"""

from __future__ import annotations

import math

from gputui.catalog import TRANSFORMER_CONFIGS

NUM_LABELS = 8  # model_library.py's num_labels, CNNs and transformers alike

APPLICATIONS = {
    "resnet50": "ResNet50",
    "mobilenetv2": "MobileNetV2",
    "efficientnet_b0": "EfficientNetB0",
    "efficientnet_b3": "EfficientNetB3",
    "efficientnet_b7": "EfficientNetB7",
}


def build_cnn(keras, name: str, image_size: int):
    """model_library.return_cnn: application body + GAP + Dense, all trainable."""
    shape = (image_size, image_size, 3)
    base = getattr(keras.applications, APPLICATIONS[name])(include_top=False, weights=None, input_shape=shape)
    base.trainable = True
    inputs = keras.Input(shape=shape)
    x = base(inputs)
    x = keras.layers.GlobalAveragePooling2D()(x)
    outputs = keras.layers.Dense(NUM_LABELS, dtype="float32")(x)  # float32 logits under mixed precision
    return keras.Model(inputs, outputs, name=name)


def transformer_config(transformers, name: str):
    if name == "bert_large":
        return transformers.BertConfig(**TRANSFORMER_CONFIGS["bert_large"], pad_token_id=0, num_labels=NUM_LABELS)
    if name == "distilbert":
        return transformers.DistilBertConfig(**TRANSFORMER_CONFIGS["distilbert"], pad_token_id=0, num_labels=NUM_LABELS)
    raise ValueError(f"no TensorFlow builder for {name!r}")


def build_transformer(transformers, name: str):
    config = transformer_config(transformers, name)
    if name == "bert_large":
        return transformers.TFBertForSequenceClassification(config)
    return transformers.TFDistilBertForSequenceClassification(config)


# --- FLOPs ---------------------------------------------------------------------------


def _layers(model):
    for layer in model.layers:
        if hasattr(layer, "layers") and layer.layers:  # a nested model (the application body)
            yield from _layers(layer)
        else:
            yield layer


def _shape(layer, which: str):
    try:
        return getattr(layer, f"{which}_shape")
    except (AttributeError, RuntimeError):
        return getattr(layer, f"get_{which}_shape_at")(0)


def cnn_train_flops(keras, model) -> float:
    """Training FLOPs of one image: 2 per multiply-add of every Conv2D, DepthwiseConv2D
    and Dense layer; backward = 2 x forward, except the stem convolution (1 x)."""
    L = keras.layers
    total = 0.0
    stem_seen = False
    for layer in _layers(model):
        if isinstance(layer, L.DepthwiseConv2D):
            out = _shape(layer, "output")
            kh, kw = layer.kernel_size
            macs = kh * kw * out[1] * out[2] * out[3]  # out channels = in channels x depth_multiplier
        elif isinstance(layer, L.Conv2D):
            inp, out = _shape(layer, "input"), _shape(layer, "output")
            kh, kw = layer.kernel_size
            groups = getattr(layer, "groups", 1) or 1
            macs = kh * kw * (inp[-1] // groups) * out[1] * out[2] * out[3]
        elif isinstance(layer, L.Dense):
            inp, out = _shape(layer, "input"), _shape(layer, "output")
            macs = math.prod(d for d in inp[1:-1]) * inp[-1] * out[-1]
        else:
            continue
        forward = 2.0 * macs
        stem = not stem_seen and isinstance(layer, (L.Conv2D, L.DepthwiseConv2D))
        stem_seen = True
        total += forward * (2.0 if stem else 3.0)  # forward + weight grad (+ input grad)
    return total


def transformer_train_flops(config, seq_len: int) -> float:
    """Training FLOPs of one sequence: 3 x forward (every matmul's input and weight
    gradient; the embeddings are trainable, so the first layer needs its input gradient)."""
    if hasattr(config, "n_layers"):  # DistilBERT
        layers, d, ff = config.n_layers, config.dim, config.hidden_dim
    else:
        layers, d, ff = config.num_hidden_layers, config.hidden_size, config.intermediate_size
    per_layer = 2 * seq_len * (4 * d * d + 2 * d * ff) + 2 * (2 * seq_len * seq_len * d)
    head = 2 * (d * d + d * config.num_labels)  # pooler / pre-classifier and classifier on [CLS]
    return 3.0 * (layers * per_layer + head)
