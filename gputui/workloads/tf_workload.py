"""TensorFlow/Keras training workloads: ``python -m gputui.workloads --framework tf``.

Stack: ``tensorflow`` + ``tf-keras`` (Keras 2, what transformers' TF models need;
``TF_USE_LEGACY_KERAS=1`` is set before anything imports TensorFlow) + ``transformers<5``
for the transformers (5.x has no TensorFlow models).  ``pip install 'gputui[tf]'``.

Models (random weights, built from code; nothing is downloaded), as tf-metal-experiments'
``model_library.py`` builds them:

* CNNs from ``tf_keras.applications`` (``weights=None``, ``include_top=False``, all
  layers trainable) + global average pooling + a Dense head of 8 classes: resnet50,
  mobilenetv2, efficientnet_b0/b3/b7 at 224/224/224/300/600 px (or ``--image-size``);
  plain ``SGD()`` (Keras defaults), like train_benchmark.py.
* Transformers: ``TFDistilBertForSequenceClassification`` / ``TFBertForSequenceClassification``
  from a config with the standard hyperparameters of ``distilbert-base-uncased`` and
  ``bert-large-uncased`` (spelled out below), 8 labels, sequence length 128 (or
  ``--seq-len``); ``Adam()`` (Keras defaults), like train_benchmark.py.

Loss: sparse categorical cross-entropy on the logits (``from_logits=True``; the head
outputs float32 logits under mixed precision).  train_benchmark.py passes the logits
to a loss that expects probabilities (``from_logits=False``); that changes the loss
value, not the work, and is not copied.

Precisions: ``fp32``, ``mixed_float16`` (Keras mixed-precision policy + dynamic loss
scaling through ``LossScaleOptimizer``), ``mixed_bfloat16`` (policy only).

Methods (see measure.py):

* ``steps``: a ``tf.function`` train step (forward, loss, gradients, optimizer update;
  ``jit_compile=True`` with ``--xla``), timed in windows by :func:`measure.measure`;
  the device is synchronized by fetching the last loss (``.numpy()``) and, on a GPU,
  ``tf.test.experimental.sync_devices()`` (the loss alone can be ready before the last
  optimizer update has run).
* ``tf-metal``: train_benchmark.py itself: ``model.compile`` + ``model.fit`` on the
  whole data set held as tensors (one random example stacked ``batch_size * steps``
  times), one untimed ``fit(epochs=1)``, then ``st = time.time(); fit(epochs=3);
  et = time.time()`` and ``batch_size * steps * epochs / (et - st)``.  ``--xla`` here
  means ``tf.config.optimizer.set_jit(True)`` (auto-clustering), as in the original.
  A Keras callback writes one protocol ``step`` line per epoch (Keras fetches the
  epoch's loss at every epoch end: that is the sync).  ``--warmup-steps`` is not used.

Pipelines:

* ``synthetic``: one random batch created on the device, fed to every step (the
  compute ceiling).  (``tf-metal`` feeds the stacked tensors through ``model.fit``,
  which slices them on the host every step, as the original does.)
* ``host``: tf.data over the locally generated PNGs of images.py (read, decode, random
  resized crop, resize, flip, normalize; ``--augment heavy`` adds rotation, colour
  jitter, Gaussian blur and Lanczos resampling, all TensorFlow ops) or over the
  generated texts, tokenized per batch on the host with images.py's WordPiece
  tokenizer; ``map(num_parallel_calls=--workers)`` + ``prefetch``.
  **tf.data parallelism is threads inside this one process, not worker processes**
  (unlike PyTorch's DataLoader): the host sampler sees the main process above 100% CPU
  and its thread count grow, and no loader child processes.  The tokenizer releases
  the GIL only while it encodes, so text batches scale less than linearly with
  ``--workers``.

FLOPs per sample (training = forward + backward), the convention of the PyTorch
workload (matmul/conv/attention only, 2 FLOPs per multiply-add): CNNs are counted by
walking the built Keras model (Conv2D, DepthwiseConv2D, Dense at their real input and
output shapes); backward costs twice the forward (input and weight gradients), except
for the stem convolution, whose input (the image) needs no gradient.  Transformers
are counted from their configuration (projections, feed-forward, attention scores and
weighted sums, pooler/pre-classifier and classifier on the [CLS] token), times 3.

Memory: TensorFlow maps nearly all GPU memory at start by default, which makes NVML's
"used" meaningless; this workload turns on memory growth for the GPU it uses (and
hides the others), so NVML shows what TensorFlow really holds, and reports TF's own
peak, ``tf.config.experimental.get_memory_info('GPU:0')['peak']`` (whole run).  On
the CPU it reports the process's peak RSS (``ru_maxrss``); ``peak_memory_source``
says which.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import sys
import tempfile
import threading
import time
from typing import Any

from gputui.catalog import MODELS, TRANSFORMER_CONFIGS
from gputui.protocol import MEASURE, WARMUP, Emitter
from gputui.workloads import images
from gputui.workloads.measure import MissingFramework, OutOfMemory, Window, emit_result, emit_window, exception_chain, measure, peak_rss_bytes, tf_metal_summary

EXTRA = "tf"  # pip install 'gputui[tf]'
NUM_LABELS = 8  # model_library.py's num_labels, CNNs and transformers alike
SYNTHETIC_TOKEN_MAX = 1000  # model_library.py draws token ids from [0, 1000)

APPLICATIONS = {
    "resnet50": "ResNet50",
    "mobilenetv2": "MobileNetV2",
    "efficientnet_b0": "EfficientNetB0",
    "efficientnet_b3": "EfficientNetB3",
    "efficientnet_b7": "EfficientNetB7",
}


PRECISIONS = {"fp32": "float32", "mixed_float16": "mixed_float16", "mixed_bfloat16": "mixed_bfloat16"}


# --- imports -------------------------------------------------------------------------


def _major_minor(version: str) -> tuple[int, int] | None:
    parts = version.split(".")
    try:
        return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0)
    except (IndexError, ValueError):
        return None


def _import_quietly(name: str):
    """Import a module, dropping the INFO lines TensorFlow's C++ side writes to fd 2 at
    import time before absl logging is set up (``WARNING: All log messages before
    absl::InitializeLog() ...``, ``I0000 ... oneDNN custom operations are on``):
    TF_CPP_MIN_LOG_LEVEL does not reach those.  Warnings and errors are kept."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        return __import__(name)
    with tempfile.TemporaryFile(mode="w+b") as capture:
        os.dup2(capture.fileno(), 2)
        try:
            return __import__(name)
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            for raw in capture.read().decode("utf-8", "replace").splitlines():
                line = raw.strip()
                if line.startswith("WARNING: All log messages before absl::InitializeLog()"):
                    continue
                if len(line) > 5 and line[0] == "I" and line[1:5].isdigit():  # I0000 00:00:... (INFO)
                    continue
                print(raw, file=sys.stderr)


class _DropTfDeprecationNotice(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "TensorFlow and JAX classes are deprecated" not in record.getMessage()


def import_frameworks(kind: str) -> dict[str, Any]:
    """tensorflow and tf_keras (+ transformers for the transformers).  Whatever is
    missing or does not fit raises MissingFramework naming the package and the fix."""
    os.environ["TF_USE_LEGACY_KERAS"] = "1"  # transformers' TF models need Keras 2 (tf-keras), whatever is set
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # no C++ INFO lines
    os.environ.setdefault("USE_TF", "1")  # transformers: TensorFlow only,
    os.environ.setdefault("USE_TORCH", "0")  # never import torch into this process
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # tf.data's threads are the parallelism
    mods: dict[str, Any] = {}
    if kind == "transformer":  # checked first: cheap, and before TensorFlow's import noise
        try:
            import transformers
        except Exception as exc:
            raise MissingFramework("transformers", EXTRA, exc) from exc
        version = getattr(transformers, "__version__", "0")
        if (_major_minor(version) or (0, 0)) >= (5, 0):
            why = ImportError(f"transformers {version} has no TensorFlow models; fix: pip install 'transformers<5'")
            raise MissingFramework("transformers", EXTRA, why)
        mods["transformers"] = transformers
        # Known, documented above (the reason for transformers<5); not worth a line per run.
        logging.getLogger("transformers.modeling_tf_utils").addFilter(_DropTfDeprecationNotice())
    try:
        tf = _import_quietly("tensorflow")
    except Exception as exc:  # ImportError, or a broken install (protobuf, numpy ABI, CUDA libraries)
        raise MissingFramework("tensorflow", EXTRA, exc) from exc
    try:
        import tf_keras
    except Exception as exc:
        not_installed = isinstance(exc, ModuleNotFoundError) and exc.name == "tf_keras"
        raise MissingFramework("tf-keras", EXTRA, None if not_installed else exc) from exc
    tf_v, keras_v = getattr(tf, "__version__", "?"), getattr(tf_keras, "__version__", "?")
    if _major_minor(tf_v) != _major_minor(keras_v):
        mm = _major_minor(tf_v)
        pin = f"{mm[0]}.{mm[1]}.*" if mm else tf_v
        why = ImportError(f"tf-keras {keras_v} does not match tensorflow {tf_v}; fix: pip install 'tf-keras=={pin}'")
        raise MissingFramework("tf-keras", EXTRA, why)
    mods["tf"], mods["keras"] = tf, tf_keras
    if kind == "transformer":
        try:  # the lazy module imports modeling_tf_* (and checks Keras) only now
            for name in ("BertConfig", "TFBertForSequenceClassification", "DistilBertConfig",
                         "TFDistilBertForSequenceClassification"):  # fmt: skip
                getattr(mods["transformers"], name)
        except Exception as exc:  # e.g. a transformers without TF models, or Keras 3 where tf-keras is needed
            raise MissingFramework("transformers", EXTRA, exc) from exc
    return mods


# --- out of memory -------------------------------------------------------------------

_OOM_MARKS = ("OOM when allocating", "RESOURCE_EXHAUSTED", "out of memory", "Out of memory")


def _is_oom_one(tf, e: BaseException) -> bool:
    if isinstance(e, tf.errors.ResourceExhaustedError):
        return True
    # XLA and some kernels report a failed allocation as another OpError.
    return isinstance(e, tf.errors.OpError) and any(mark in str(e) for mark in _OOM_MARKS)


def _oom_message(e: BaseException) -> str:
    """The informative line of a TF error ("Graph execution error:" may come first),
    without the ``{{function_node ...}}`` prefix and the empty ``name:`` suffix."""
    text = str(getattr(e, "message", None) or e)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    line = next((line for line in lines if any(mark in line for mark in _OOM_MARKS)), lines[0] if lines else "")
    line = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", line)
    line = re.sub(r"\s*name:\s*$", "", line)
    return line or type(e).__name__


def as_oom(tf, exc: BaseException, *, batch_size: int, **fields: Any) -> OutOfMemory | None:
    culprit = next((e for e in exception_chain(exc) if _is_oom_one(tf, e)), None)
    if culprit is None:
        return None
    return OutOfMemory(_oom_message(culprit), batch_size=batch_size, **fields)


# --- devices and memory --------------------------------------------------------------


def setup_device(tf, requested: str) -> tuple[str, str | None]:
    """Pick the device before TensorFlow initializes any: the first GPU (memory growth
    on, the other GPUs hidden) or the CPU.  Returns ("gpu" | "cpu", device name)."""
    gpus = tf.config.list_physical_devices("GPU")
    if requested == "cuda" and not gpus:
        raise ValueError("--device cuda: TensorFlow sees no GPU")
    if requested == "cpu" or not gpus:
        with contextlib.suppress(RuntimeError, ValueError):
            tf.config.set_visible_devices([], "GPU")
        return "cpu", None
    gpu = gpus[0]
    with contextlib.suppress(RuntimeError, ValueError):
        tf.config.set_visible_devices([gpu], "GPU")
    with contextlib.suppress(RuntimeError, ValueError):
        tf.config.experimental.set_memory_growth(gpu, True)
    name = None
    with contextlib.suppress(Exception):
        name = tf.config.experimental.get_device_details(gpu).get("device_name")
    return "gpu", name


def setup_replicas(tf, requested: str, replicas: int) -> tuple[str, str | None, list[str]]:
    """Devices for MirroredStrategy, before TensorFlow initializes any: ``replicas``
    GPUs (0: every GPU), memory growth on; without a GPU, the CPU split into
    ``replicas`` logical devices (how data parallelism is tested without GPUs).
    Returns ("gpu" | "cpu", the first device's name, the devices' names)."""
    gpus = tf.config.list_physical_devices("GPU")
    if requested == "cuda" and not gpus:
        raise ValueError("--device cuda: TensorFlow sees no GPU")
    if requested != "cpu" and gpus:
        chosen = gpus if replicas == 0 else gpus[:replicas]
        if len(chosen) < replicas:
            raise ValueError(f"--data-parallel {replicas}: TensorFlow sees {len(gpus)} GPU(s)")
        tf.config.set_visible_devices(chosen, "GPU")
        for gpu in chosen:
            with contextlib.suppress(RuntimeError, ValueError):
                tf.config.experimental.set_memory_growth(gpu, True)
        name = None
        with contextlib.suppress(Exception):
            name = tf.config.experimental.get_device_details(chosen[0]).get("device_name")
        return "gpu", name, [f"/gpu:{i}" for i in range(len(chosen))]
    with contextlib.suppress(RuntimeError, ValueError):
        tf.config.set_visible_devices([], "GPU")
    count = replicas or 1
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(count)])
    return "cpu", None, [f"/cpu:{i}" for i in range(count)]


def peak_memory_fn(tf, device: str):
    if device == "gpu":

        def gpu_peak() -> int | None:
            try:
                return int(tf.config.experimental.get_memory_info("GPU:0")["peak"])
            except Exception:
                return None

        return gpu_peak, "tf.config.experimental.get_memory_info('GPU:0')['peak']"

    return peak_rss_bytes, "ru_maxrss"


# --- models --------------------------------------------------------------------------


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


# --- input pipelines -----------------------------------------------------------------


def _gaussian_blur(tf, img, sigma, radius: int = 6):
    """Separable Gaussian blur of an HxWx3 float image (fixed 13-tap kernel, edges
    replicated like PIL's GaussianBlur)."""
    x = tf.range(-radius, radius + 1, dtype=tf.float32)
    k = tf.exp(-0.5 * tf.square(x / sigma))
    k = k / tf.reduce_sum(k)
    padded = tf.pad(img[None], [[0, 0], [radius, radius], [radius, radius], [0, 0]], mode="SYMMETRIC")
    kh = tf.tile(tf.reshape(k, [-1, 1, 1, 1]), [1, 1, 3, 1])
    kw = tf.tile(tf.reshape(k, [1, -1, 1, 1]), [1, 1, 3, 1])
    out = tf.nn.depthwise_conv2d(padded, kh, strides=[1, 1, 1, 1], padding="VALID")
    out = tf.nn.depthwise_conv2d(out, kw, strides=[1, 1, 1, 1], padding="VALID")
    return out[0]


def _rotate(tf, img, degrees):
    """Rotate about the centre, corners filled black (PIL's rotate without expand)."""
    shape = tf.shape(img)
    h, w = tf.cast(shape[0], tf.float32), tf.cast(shape[1], tf.float32)
    a = degrees * (math.pi / 180.0)
    c, s = tf.cos(a), tf.sin(a)
    x_off = ((w - 1) - (c * (w - 1) - s * (h - 1))) / 2.0
    y_off = ((h - 1) - (s * (w - 1) + c * (h - 1))) / 2.0
    transform = tf.stack([c, -s, x_off, s, c, y_off, 0.0, 0.0])[None]
    out = tf.raw_ops.ImageProjectiveTransformV3(
        images=img[None], transforms=transform, output_shape=shape[:2], fill_value=0.0,
        interpolation="BILINEAR", fill_mode="CONSTANT",
    )  # fmt: skip
    return out[0]


def augment_image(tf, path, size: int, level: str):
    """images.augment in TensorFlow ops: HxWx3 float32, normalized with ImageNet's
    mean/std (channels last, Keras' layout)."""
    img = tf.io.decode_image(tf.io.read_file(path), channels=3, expand_animations=False)
    img = tf.image.convert_image_dtype(img, tf.float32)  # [0, 1]
    method = "bilinear"
    if level == "heavy":
        img = _rotate(tf, img, tf.random.uniform([], -20.0, 20.0))
        img = img * tf.random.uniform([], 0.6, 1.4)  # brightness
        mean = tf.reduce_mean(tf.image.rgb_to_grayscale(img))
        img = mean + tf.random.uniform([], 0.6, 1.4) * (img - mean)  # contrast
        gray = tf.image.rgb_to_grayscale(img)
        img = gray + tf.random.uniform([], 0.6, 1.4) * (img - gray)  # colour (saturation)
        img = tf.clip_by_value(img, 0.0, 1.0)
        img = _gaussian_blur(tf, img, tf.random.uniform([], 0.5, 2.0))
        method = "lanczos3"
    elif level != "light":
        raise ValueError(f"--augment: expected one of {images.AUGMENT_LEVELS}, not {level!r}")
    begin, crop, _ = tf.image.sample_distorted_bounding_box(
        tf.shape(img),
        bounding_boxes=tf.zeros([1, 0, 4]),
        min_object_covered=0.0,
        aspect_ratio_range=(3 / 4, 4 / 3),
        area_range=(0.35, 1.0),
        max_attempts=10,
        use_image_if_no_bounding_boxes=True,
    )  # fmt: skip  (torchvision's RandomResizedCrop box, as images.augment draws it)
    img = tf.slice(img, begin, crop)
    img = tf.image.resize(img, [size, size], method=method)
    img = tf.image.random_flip_left_right(img)
    img = (img - images.MEAN) / images.STD
    img.set_shape([size, size, 3])
    return img


def host_dataset(tf, kind: str, *, batch_size: int, workers: int, image_size: int | None, seq_len: int | None,
                 augment: str):  # fmt: skip
    """An endless tf.data pipeline of (x, y) batches.  ``workers`` is map's
    num_parallel_calls: threads of tf.data's pool in this process (not processes)."""
    # 0: map runs inline, one element at a time; else out of order, so that one slow
    # element does not hold back the others.
    parallel = {"num_parallel_calls": workers, "deterministic": False} if workers > 0 else {}
    if kind == "cnn":
        assert image_size is not None, "a CNN's pipeline needs image_size"
        try:
            files = images.ensure_image_dataset()  # generated with Pillow on first use
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] != "PIL":
                raise
            raise MissingFramework("pillow", EXTRA) from exc
        paths = [p for p, _ in files]
        labels = [label for _, label in files]
        ds = tf.data.Dataset.from_tensor_slices((paths, labels))
        ds = ds.shuffle(len(paths), reshuffle_each_iteration=True).repeat()
        ds = ds.map(lambda p, y: (augment_image(tf, p, image_size, augment), y), **parallel)
        ds = ds.batch(batch_size, drop_remainder=True)
    else:
        import numpy as np

        texts, labels, tokenizer_path = images.ensure_text_dataset()
        local = threading.local()  # one tokenizer per tf.data thread

        def encode(batch):
            tok = getattr(local, "tok", None)
            if tok is None:
                tok = local.tok = images.load_tokenizer(tokenizer_path, seq_len)
            encodings = tok.encode_batch([t.decode("utf-8") for t in batch])
            ids = np.asarray([e.ids for e in encodings], dtype=np.int32)
            mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int32)
            return ids, mask

        def tokenize(text, y):
            ids, mask = tf.numpy_function(encode, [text], (tf.int32, tf.int32), stateful=False)
            ids.set_shape([batch_size, seq_len])
            mask.set_shape([batch_size, seq_len])
            return {"input_ids": ids, "attention_mask": mask}, y

        ds = tf.data.Dataset.from_tensor_slices((texts, labels))
        ds = ds.shuffle(len(texts), reshuffle_each_iteration=True).repeat()
        ds = ds.batch(batch_size, drop_remainder=True)
        ds = ds.map(tokenize, **parallel)
    return ds.prefetch(max(2, workers))


# --- the run -------------------------------------------------------------------------


def run(args, emitter: Emitter, *, mark=None) -> dict[str, Any]:
    """Build, warm up and measure; return the result fields.  Raises MissingFramework,
    OutOfMemory (after TensorFlow's OOM, with the protocol fields) or ValueError."""
    spec = MODELS[args.model]
    if args.precision not in PRECISIONS:
        raise ValueError(f"--precision: expected one of {', '.join(PRECISIONS)} for tf")
    if getattr(args, "compile", False):
        raise ValueError("--compile is a PyTorch option; TensorFlow uses --xla")
    image_size = (args.image_size or spec.image_size) if spec.kind == "cnn" else None
    seq_len = (args.seq_len or spec.seq_len) if spec.kind == "transformer" else None
    if seq_len is not None and seq_len > 512:
        raise ValueError("--seq-len: at most 512 (the models' position embeddings)")
    if image_size is not None and image_size < 32:
        raise ValueError("--image-size: at least 32 (Keras applications' smallest input)")
    mods = import_frameworks(spec.kind)
    tf = mods["tf"]
    replicas = getattr(args, "data_parallel", 1)
    if replicas != 1 and args.method == "tf-metal":
        raise ValueError("--data-parallel: the steps method only (tf-metal times model.fit as the original does)")
    if replicas != 1:
        device, device_name, devices = setup_replicas(tf, getattr(args, "device", "auto"), replicas)
    else:
        (device, device_name), devices = setup_device(tf, getattr(args, "device", "auto")), []
    peak_memory, peak_source = peak_memory_fn(tf, device)
    info = {"framework": "tf", "model": args.model, "precision": args.precision}
    try:
        return _run(args, emitter, mods, spec, device, device_name, image_size, seq_len, info, peak_memory,
                    peak_source, mark, devices)  # fmt: skip
    except BaseException as exc:
        oom = as_oom(tf, exc, batch_size=args.batch_size, peak_memory_bytes=peak_memory(), **info)
        if oom is not None:
            raise oom from None
        raise


def _run(args, emitter, mods, spec, device, device_name, image_size, seq_len, info, peak_memory, peak_source, mark, devices=()):
    tf, keras = mods["tf"], mods["keras"]
    bs = args.batch_size
    # MirroredStrategy (data parallel): a replica per device, each a batch of bs, the
    # gradients all-reduced in every step; otherwise the default strategy (no-op).
    strategy = tf.distribute.MirroredStrategy(devices=list(devices)) if devices else tf.distribute.get_strategy()
    replicas = strategy.num_replicas_in_sync
    global_bs = bs * replicas
    tf_metal = args.method == "tf-metal"
    xla = bool(args.xla)
    keras.mixed_precision.set_global_policy(PRECISIONS[args.precision])
    # train_benchmark.py: tf.config.optimizer.set_jit(args.xla); the steps method
    # compiles its train step with jit_compile instead (auto-clustering stays off).
    tf.config.optimizer.set_jit(xla if tf_metal else False)
    tf.random.set_seed(0)
    keras.utils.set_random_seed(0)

    with strategy.scope():  # variables are mirrored on every replica's device
        if spec.kind == "cnn":
            model = build_cnn(keras, args.model, image_size)
            optimizer = keras.optimizers.SGD()
            flops = _counted(lambda: cnn_train_flops(keras, model))
        else:
            model = build_transformer(mods["transformers"], args.model)
            optimizer = keras.optimizers.Adam()
            flops = _counted(lambda: transformer_train_flops(model.config, seq_len))
    loss_scale = args.precision == "mixed_float16"
    # Per-example losses averaged over the global batch: the replicas' gradients then sum
    # to the gradient of the whole batch (tf.distribute's convention).
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none" if devices else "auto")

    start = {
        **info,
        "title": spec.title,
        "device": device,
        "device_name": device_name,
        "tf_version": tf.__version__,
        "keras_version": getattr(keras, "__version__", None),
        "transformers_version": getattr(mods.get("transformers"), "__version__", None),
        "batch_size": bs,
        "steps": args.steps,
        "warmup_steps": None if tf_metal else args.warmup_steps,
        "method": args.method,
        "epochs": args.epochs if tf_metal else None,
        "pipeline": args.pipeline,
        "workers": args.workers if args.pipeline == "host" else None,
        "workers_are": "tf.data threads" if args.pipeline == "host" else None,
        "augment": args.augment if args.pipeline == "host" and spec.kind == "cnn" else None,
        "image_size": image_size,
        "seq_len": seq_len,
        "data_format": "channels_last" if spec.kind == "cnn" else None,
        "xla": xla,
        "xla_mode": ("set_jit" if tf_metal else "jit_compile") if xla else None,
        "loss_scale": "dynamic" if loss_scale else None,
        "memory_growth": device == "gpu",
        "optimizer": type(optimizer).__name__ + (" (LossScaleOptimizer)" if loss_scale else ""),
        "num_labels": NUM_LABELS,
        "flops_per_sample": flops,
        "peak_memory_source": peak_source,
        "pid": os.getpid(),
        "replicas": replicas if devices else None,
        "strategy": type(strategy).__name__ if devices else None,
        "global_batch_size": global_bs if devices else None,
    }
    result_info = {**info, "device": device, "peak_memory_source": peak_source}
    if tf_metal:
        return _run_tf_metal(args, emitter, tf, keras, spec, model, optimizer, loss_fn, image_size, seq_len,
                             start, result_info, flops, peak_memory, mark)  # fmt: skip

    with strategy.scope():
        if loss_scale:
            optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)
        transformer = spec.kind == "transformer"
        if transformer:  # transformers' TF models create their weights on the first call
            model(tf.zeros((1, seq_len), tf.int32), training=False)
    variables = model.trainable_variables

    def replica_step(x, y):
        with tf.GradientTape() as tape:
            out = model(x, training=True)
            logits = out.logits if transformer else out
            loss = loss_fn(y, tf.cast(logits, tf.float32))
            if devices:
                loss = tf.nn.compute_average_loss(loss, global_batch_size=global_bs)
            scaled = optimizer.get_scaled_loss(loss) if loss_scale else loss
        grads = tape.gradient(scaled, variables)
        if loss_scale:
            grads = optimizer.get_unscaled_gradients(grads)
        optimizer.apply_gradients(zip(grads, variables))  # all-reduced across replicas
        return loss

    # Under MirroredStrategy XLA compiles each replica's step (strategy.run itself cannot be).
    replica = tf.function(replica_step, jit_compile=True) if devices and xla else replica_step

    @tf.function(jit_compile=xla and not devices, reduce_retracing=True)
    def train_step(x, y):
        if not devices:
            return replica_step(x, y)
        losses = strategy.run(replica, args=(x, y))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    if args.pipeline == "synthetic":
        x, y = _synthetic_batch(tf, spec.kind, global_bs, image_size, seq_len)
        if devices:  # the global batch split into the replicas' shares, once
            x, y = next(iter(strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensors((x, y)).unbatch().batch(global_bs))))

        def next_batch():
            return x, y
    else:
        dataset = host_dataset(tf, spec.kind, batch_size=global_bs, workers=args.workers, image_size=image_size,
                               seq_len=seq_len, augment=args.augment)  # fmt: skip
        iterator = iter(strategy.experimental_distribute_dataset(dataset) if devices else dataset)

        def next_batch():
            return next(iterator)

    last: list[Any] = [None]

    def step() -> None:
        xb, yb = next_batch()
        last[0] = train_step(xb, yb)

    sync_devices = getattr(getattr(tf.test, "experimental", None), "sync_devices", None)

    def sync() -> None:
        if last[0] is not None:
            last[0].numpy()  # waits for the step's loss (and surfaces errors)
        if device == "gpu" and sync_devices is not None:
            sync_devices()  # ... and for everything else enqueued (the last optimizer update)

    emitter.start(**start)
    return measure(
        step, sync, batch_size=global_bs, warmup_steps=args.warmup_steps, steps=args.steps, emitter=emitter,
        method="steps", flops_per_sample=flops, peak_memory=peak_memory, info=result_info, mark=mark,
    )  # fmt: skip


def _counted(count) -> float | None:
    try:
        return float(count())
    except Exception as exc:  # counting is a nicety; never fail the run for it
        print(f"gputui.workloads: could not count FLOPs ({type(exc).__name__}: {exc})", file=sys.stderr)
        return None


def _synthetic_batch(tf, kind: str, bs: int, image_size: int | None, seq_len: int | None):
    """One random batch, created on the default device (the GPU when there is one)."""
    if kind == "cnn":
        x = tf.random.uniform((bs, image_size, image_size, 3), 0.0, 1.0, dtype=tf.float32)
    else:
        x = tf.random.uniform((bs, seq_len), 0, SYNTHETIC_TOKEN_MAX, dtype=tf.int64)
    y = tf.random.uniform((bs,), 0, NUM_LABELS, dtype=tf.int64)
    return x, y


def _run_tf_metal(args, emitter, tf, keras, spec, model, optimizer, loss_fn, image_size, seq_len, start,
                  result_info, flops, peak_memory, mark):  # fmt: skip
    """train_benchmark.py: compile, fit one epoch untimed, then fit ``epochs`` epochs
    timed as one span.  Keras wraps the optimizer in a LossScaleOptimizer itself under
    mixed_float16.  The result is built as measure.measure builds it for this method."""
    bs, steps, epochs = args.batch_size, args.steps, args.epochs
    model.compile(optimizer=optimizer, loss=loss_fn)
    if args.pipeline == "synthetic":
        # model_library.py: one random example, stacked batch_size * steps times.
        if spec.kind == "cnn":
            example_x = tf.random.uniform((image_size, image_size, 3), 0.0, 1.0, dtype=tf.float32)
        else:
            example_x = tf.random.uniform((seq_len,), 0, SYNTHETIC_TOKEN_MAX, dtype=tf.int64)
        example_y = tf.random.uniform((), 0, NUM_LABELS, dtype=tf.int64)
        n = bs * steps
        dataset_x = tf.repeat(example_x[None], n, axis=0)
        dataset_y = tf.repeat(example_y[None], n, axis=0)
        fit_data = {"x": dataset_x, "y": dataset_y, "batch_size": bs}
    else:
        dataset = host_dataset(tf, spec.kind, batch_size=bs, workers=args.workers, image_size=image_size,
                               seq_len=seq_len, augment=args.augment)  # fmt: skip
        fit_data = {"x": dataset, "steps_per_epoch": steps}

    windows: list[Window] = []

    class EpochClock(keras.callbacks.Callback):
        """One protocol line per timed epoch.  No ``_supports_tf_logs``: Keras converts
        the epoch's logs to numbers before calling us, i.e. waits for the device."""

        def __init__(self, began: float) -> None:
            super().__init__()
            self.began = began

        def on_epoch_end(self, epoch, logs=None):
            now = time.perf_counter()
            window = Window(MEASURE, steps * (epoch + 2), steps, float(steps * bs), now - self.began)
            windows.append(window)
            if mark is not None:
                mark()
            emit_window(emitter, window, epoch=epoch + 1)
            self.began = now

    emitter.start(**start)
    began = time.perf_counter()
    model.fit(**fit_data, epochs=1, verbose=0)  # the warm-up epoch (tracing, autotuning)
    now = time.perf_counter()
    emit_window(emitter, Window(WARMUP, steps, steps, float(steps * bs), now - began), epoch=0)
    if mark is not None:
        mark()
    st = time.perf_counter()  # st = time.time()
    model.fit(**fit_data, epochs=epochs, verbose=0, callbacks=[EpochClock(st)])
    et = time.perf_counter()  # et = time.time()
    result = tf_metal_summary(windows, et - st, batch_size=bs, steps=steps, epochs=epochs, flops_per_sample=flops)
    return emit_result(emitter, result, method="tf-metal", info=result_info, peak_memory=peak_memory)
