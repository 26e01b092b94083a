"""TensorFlow's side of the Keras workload that is not the run itself: importing
the frameworks (naming what to install when one is missing or mismatched), choosing
the devices, reading peak memory, and recognising TensorFlow's out-of-memory errors.

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
import os
import re
import sys
import tempfile
from types import ModuleType
from typing import Any

from gputui.workloads.measure import MissingFramework, WorkloadOutOfMemory, exception_chain, peak_rss_bytes

EXTRA = "tf"  # pyproject.toml's extra: pip install -e '.[tf]' in the checkout


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


def import_frameworks(kind: str) -> dict[str, ModuleType]:
    """tensorflow and tf_keras (+ transformers for the transformers).  Whatever is
    missing or does not fit raises MissingFramework naming the package and the fix."""
    os.environ["TF_USE_LEGACY_KERAS"] = "1"  # transformers' TF models need Keras 2 (tf-keras), whatever is set
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # no C++ INFO lines
    # transformers: TensorFlow only, never torch in this process.  Set, not defaulted: a
    # USE_TF=0 inherited from a shell (or a torch workload's process) would leave only
    # placeholders of the TF models, whose first use fails with "requires the TensorFlow library".
    os.environ["USE_TF"], os.environ["USE_TORCH"] = "1", "0"
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # tf.data's threads are the parallelism
    mods: dict[str, ModuleType] = {}  # by the name the workload uses: tf, keras, transformers
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


def as_oom(tf, exc: BaseException, *, batch_size: int, **fields: Any) -> WorkloadOutOfMemory | None:
    culprit = next((e for e in exception_chain(exc) if _is_oom_one(tf, e)), None)
    if culprit is None:
        return None
    return WorkloadOutOfMemory(_oom_message(culprit), batch_size=batch_size, **fields)


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
