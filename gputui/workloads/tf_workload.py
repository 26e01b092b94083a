"""TensorFlow/Keras training workloads: ``python -m gputui.workloads --framework tf``.

Stack: ``tensorflow`` + ``tf-keras`` (Keras 2, what transformers' TF models need;
``TF_USE_LEGACY_KERAS=1`` is set before anything imports TensorFlow) + ``transformers<5``
for the transformers (5.x has no TensorFlow models).  ``pip install -e '.[tf]'`` in the checkout.

Models and their training FLOPs: tf_models.py.  Importing the frameworks, the devices,
peak memory and TensorFlow's out-of-memory errors: tf_frameworks.py.

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

Pipelines: ``synthetic`` (one random batch created on the device, fed to every step:
the compute ceiling; ``tf-metal`` feeds its stacked tensors through ``model.fit``, which
slices them on the host every step, as the original does) or ``host`` (tf.data,
threads in this process: tf_input.py).
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from gputui.catalog import MODELS
from gputui.protocol import MEASURE, WARMUP, Emitter, ResultLine, RunInfo
from gputui.workloads.measure import Window, emit_result, emit_window, measure, tf_metal_summary
from gputui.workloads.tf_frameworks import as_oom, import_frameworks, peak_memory_fn, setup_device, setup_replicas
from gputui.workloads.tf_input import host_dataset
from gputui.workloads.tf_models import NUM_LABELS, build_cnn, build_transformer, cnn_train_flops, transformer_train_flops

SYNTHETIC_TOKEN_MAX = 1000  # model_library.py draws token ids from [0, 1000)

PRECISIONS = {"fp32": "float32", "mixed_float16": "mixed_float16", "mixed_bfloat16": "mixed_bfloat16"}


def run(args, emitter: Emitter, *, mark=None) -> ResultLine:
    """Build, warm up and measure; return the result fields.  Raises MissingFramework,
    WorkloadOutOfMemory (after TensorFlow's OOM, with the protocol fields) or ValueError."""
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
    info = RunInfo(framework="tf", model=args.model, precision=args.precision)
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

    transformer = spec.kind == "transformer"
    with strategy.scope():  # variables are mirrored on every replica's device
        if not transformer:
            model = build_cnn(keras, args.model, image_size)
            optimizer = keras.optimizers.SGD()
            flops = _counted(lambda: cnn_train_flops(keras, model))
        else:
            model = build_transformer(mods["transformers"], args.model)
            optimizer = keras.optimizers.Adam()
            flops = _counted(lambda: transformer_train_flops(model.config, seq_len))
            # transformers' TF models create their weights on the first call: here, so
            # that no train step (ours or model.fit's) creates variables (see below).
            model(tf.zeros((1, seq_len), tf.int32), training=False)
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
    result_info: RunInfo = {**info, "device": device, "peak_memory_source": peak_source}
    if tf_metal:
        return _run_tf_metal(args, emitter, tf, keras, spec, model, optimizer, loss_fn, image_size, seq_len,
                             start, result_info, flops, peak_memory, mark)  # fmt: skip

    variables = model.trainable_variables
    with strategy.scope():
        if loss_scale:
            optimizer = keras.mixed_precision.LossScaleOptimizer(optimizer)
        # The slot variables now, not in the first train step: a tf.function whose first
        # call creates variables is traced a second time, which doubles the tracing.
        optimizer.build(variables)

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
    # The slot variables before fit (as in the steps method): else fit's first call
    # creates them and its train function is traced twice.  Untimed, as that tracing is.
    model.optimizer.build(model.trainable_variables)
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

    class EpochClock(keras.callbacks.Callback):  # type: ignore[name-defined]  # keras is imported at run time
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
