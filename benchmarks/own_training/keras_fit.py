"""Keras ``model.fit`` on synthetic MNIST-shaped data.

Follows the Keras guide "Training & evaluation with the built-in methods"
(keras.io/guides/training_with_built_in_methods/) and the "Simple MNIST
convnet" example (keras.io/examples/vision/mnist_convnet/): a Sequential
convnet, compile(adam, crossentropy, accuracy), fit(..., verbose=1) with a
tf.data pipeline, plus user Callbacks: one stops training after --seconds, one
times batches and prints samples/s at the end. Keras 3 on the TensorFlow
backend by default; --legacy-keras uses tf.keras from tf_keras (Keras 2).

    python keras_fit.py --variant fed --seconds 40
    python keras_fit.py --variant starved --device cpu --seconds 10
"""

import argparse
import gc
import os
import time

import numpy as np


def parse_args():
    p = argparse.ArgumentParser(description="Keras fit on synthetic MNIST-shaped data")
    p.add_argument("--variant", choices=["fed", "starved", "python-bound"], default="fed")
    p.add_argument("--seconds", type=float, default=40.0, help="approximate training time")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--aug-passes", type=int, default=20, help="starved variant: numpy blur/jitter passes per sample in the generator")
    p.add_argument("--legacy-keras", action="store_true", help="TF_USE_LEGACY_KERAS=1: tf.keras is tf_keras (Keras 2) instead of Keras 3")
    return p.parse_args()


args = parse_args()
if args.legacy_keras:
    os.environ["TF_USE_LEGACY_KERAS"] = "1"
if args.device == "cpu":
    os.environ["CUDA_VISIBLE_DEVICES"] = ""

import tensorflow as tf  # noqa: E402

if args.legacy_keras:
    keras = tf.keras
else:
    import keras  # noqa: E402
layers = keras.layers

num_classes = 10
input_shape = (28, 28, 1)
batch_size = args.batch_size or (2 if args.variant == "python-bound" else 128)


# ---------------------------------------------------------------- data
rng = np.random.default_rng(0)
num_samples = 12_800
x_train = rng.random((num_samples,) + input_shape, dtype=np.float32)
y_train = keras.utils.to_categorical(rng.integers(0, num_classes, num_samples), num_classes)


def augment(i):
    """Per-sample numpy augmentation in Python (runs under the GIL, one at a time)."""
    i = int(i)
    img = x_train[i, :, :, 0]
    r = np.random.default_rng(i)
    for _ in range(args.aug_passes):
        p = np.pad(img, 1, mode="edge")
        img = sum(p[dy : dy + 28, dx : dx + 28] for dy in range(3) for dx in range(3)) / 9.0
        img = np.clip(img * r.uniform(0.9, 1.1) + r.uniform(-0.05, 0.05), 0.0, 1.0)
    return img[:, :, None].astype(np.float32), y_train[i]


def load_and_augment(i):
    img, label = tf.py_function(augment, [i], (tf.float32, tf.float32))
    img.set_shape(input_shape)
    label.set_shape((num_classes,))
    return img, label


if args.variant == "starved":
    train_ds = tf.data.Dataset.range(num_samples).shuffle(num_samples).map(load_and_augment).batch(batch_size)
else:
    train_ds = tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(4096).batch(batch_size).prefetch(tf.data.AUTOTUNE)


# ---------------------------------------------------------------- model
model = keras.Sequential(
    [
        keras.Input(shape=input_shape),
        layers.Conv2D(32, kernel_size=(3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Conv2D(64, kernel_size=(3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Flatten(),
        layers.Dropout(0.5),
        layers.Dense(num_classes, activation="softmax"),
    ]
)
model.summary()


class TimeLimit(keras.callbacks.Callback):
    def __init__(self, seconds):
        super().__init__()
        self.seconds = seconds

    def on_train_begin(self, logs=None):
        self.start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        if time.perf_counter() - self.start > self.seconds:
            self.model.stop_training = True


class Throughput(keras.callbacks.Callback):
    """Times batches; the first `warmup` batches (tf.function tracing) are skipped."""

    def __init__(self, batch_size, warmup=5):
        super().__init__()
        self.batch_size, self.warmup = batch_size, warmup
        self.seen = 0
        self.t0 = self.t1 = None

    def on_train_batch_end(self, batch, logs=None):
        self.seen += 1
        if self.seen == self.warmup:
            self.t0 = time.perf_counter()
        elif self.seen > self.warmup:
            self.t1 = time.perf_counter()

    def on_train_end(self, logs=None):
        if self.t1 is None:
            print("throughput: n/a (too few steps)", flush=True)
            return
        n = (self.seen - self.warmup) * self.batch_size
        print(f"throughput: {n / (self.t1 - self.t0):.1f} samples/s", flush=True)


class LossHistory(keras.callbacks.Callback):
    """python-bound variant: read the batch loss back as a float every step."""

    def on_train_begin(self, logs=None):
        self.losses = []

    def on_train_batch_end(self, batch, logs=None):
        self.losses.append(float(logs["loss"]))


callbacks = [TimeLimit(args.seconds), Throughput(batch_size)]
if args.variant == "python-bound":
    callbacks.append(LossHistory())

model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
model.fit(train_ds, epochs=1000, callbacks=callbacks, verbose=1)

# Drop the tf.data iterator (and the py_function work it may still be doing)
# before interpreter shutdown: after a mid-epoch stop, exit can otherwise hang.
gc.collect()
