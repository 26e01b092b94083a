"""The host input pipelines of the TensorFlow workload (``--pipeline host``).

tf.data over the locally generated PNGs of images.py (read, decode, random resized crop,
resize, flip, normalize; ``--augment heavy`` adds rotation, colour jitter, Gaussian blur
and Lanczos resampling, all TensorFlow ops) or over the generated texts, tokenized per
batch on the host with images.py's WordPiece tokenizer;
``map(num_parallel_calls=--workers)`` + ``prefetch``. **tf.data parallelism is threads
inside this one process, not worker processes** (unlike PyTorch's DataLoader): the host
sampler sees the main process above 100% CPU and its thread count grow, and no loader
child processes. The tokenizer releases the GIL only while it encodes, so text batches
scale less than linearly with ``--workers``.
"""

from __future__ import annotations

import math
import threading

from gputui.workloads import images
from gputui.workloads.measure import MissingFramework
from gputui.workloads.tf_frameworks import EXTRA


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

        assert seq_len is not None, "a text model's pipeline needs seq_len"
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
