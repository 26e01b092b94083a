"""PyTorch training workloads: ``python -m gputui.workloads --framework torch``.

Models (random weights, built from code; nothing is downloaded):

* CNNs from torchvision (``weights=None``, 1000 classes): resnet50, mobilenetv2,
  efficientnet_b0/b3/b7 at 224/224/224/300/600 px (or ``--image-size``);
  SGD with momentum 0.9.
* Transformers from ``transformers`` PyTorch classes built from a config with the
  standard hyperparameters of ``distilbert-base-uncased`` and ``bert-large-uncased``,
  a sequence-classification head (3 labels), sequence length 128 (or ``--seq-len``),
  SDPA attention where the installed transformers offers it; AdamW.

One training step = zero grads, forward under the precision's autocast, cross-entropy
loss (in fp32), backward, optimizer step.  Fused optimizers (``fused=True``: one
multi-tensor kernel, and no host sync under GradScaler; CUDA, and the CPU on torch >=
2.4), else foreach.

Precisions: ``fp32`` (TF32 explicitly off for matmul and cuDNN), ``tf32`` (TF32 on),
``bf16`` (bfloat16 autocast; TF32 on for what stays fp32), ``fp16`` (float16 autocast
+ ``torch.amp.GradScaler``; TF32 on).  ``--channels-last`` (CNNs), ``--compile``
(``torch.compile`` of model + loss, ``--compile-mode``), cuDNN benchmark mode on CUDA.

Pipelines: ``synthetic`` (random tensors created once on the device: the compute
ceiling) or ``host`` (a DataLoader over locally generated PNGs decoded and augmented
with PIL in ``--workers`` worker processes, see images.py; for transformers, generated
text tokenized on the host by a WordPiece tokenizer trained in-process).

FLOPs per sample: counted at start with ``torch.utils.flop_counter.FlopCounterMode``
over one training step (forward + backward, batch 1) of the same model built on the
``meta`` device (no memory, no compute); convolution backward is counted with a
groups-aware formula (PyTorch's own overcounts grouped/depthwise convolutions by the
group count), attention is counted through the eager attention path (the same matmul
FLOPs as SDPA).  Matmul/conv/attention FLOPs only, the usual convention.

Peak memory: ``torch.cuda.max_memory_allocated`` on CUDA (the caching allocator's
peak of live tensors, whole run); on the CPU the process's peak RSS (``ru_maxrss``),
reported with ``peak_memory_source``.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
import warnings
from types import ModuleType
from typing import Any

from gputui.catalog import MODELS, TRANSFORMER_CONFIGS
from gputui.protocol import Emitter, ResultLine, RunInfo
from gputui.workloads import images
from gputui.workloads.measure import MissingFramework, WorkloadOutOfMemory, exception_chain, measure, peak_rss_bytes

EXTRA = "torch"  # pyproject.toml's extra: pip install -e '.[torch]' in the checkout
NUM_CLASSES = 1000  # CNN head (ImageNet-sized)
NUM_LABELS = 3  # transformer sequence-classification head

TORCHVISION_BUILDERS = {
    "resnet50": "resnet50",
    "mobilenetv2": "mobilenet_v2",
    "efficientnet_b0": "efficientnet_b0",
    "efficientnet_b3": "efficientnet_b3",
    "efficientnet_b7": "efficientnet_b7",
}


# --- imports -------------------------------------------------------------------------


def import_frameworks(kind: str) -> dict[str, ModuleType]:
    """torch, plus torchvision (CNNs) or transformers (transformers), by package name; a
    package that cannot be imported raises MissingFramework naming it."""
    mods: dict[str, ModuleType] = {}
    needed = ["torch"] + (["torchvision"] if kind == "cnn" else ["transformers"])
    for package in needed:
        if package == "transformers":
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # we fork DataLoader workers
            os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
            # transformers 4.x would import TensorFlow too when installed, and with USE_TF=1
            # inherited it would offer TF models only: set, not defaulted.
            os.environ["USE_TF"] = "0"
        try:
            mods[package] = __import__(package)
            if package == "transformers":  # lazy modules: import the classes now
                for name in ("BertConfig", "BertForSequenceClassification", "DistilBertConfig",
                             "DistilBertForSequenceClassification"):  # fmt: skip
                    getattr(mods[package], name)
        except Exception as exc:  # ImportError, or a broken install (e.g. torchvision built for another torch)
            raise MissingFramework(package, EXTRA, exc) from exc
    return mods


# --- out of memory -------------------------------------------------------------------


def _is_oom_one(e: BaseException) -> bool:
    torch = sys.modules.get("torch")
    oom_type = getattr(torch, "OutOfMemoryError", None) if torch is not None else None
    if oom_type is not None and isinstance(e, oom_type):
        return True
    if not isinstance(e, RuntimeError):
        return False
    text = str(e).lower()
    return "out of memory" in text or "can't allocate memory" in text  # the latter: DefaultCPUAllocator


def is_oom(exc: BaseException) -> bool:
    """torch.OutOfMemoryError, or a RuntimeError saying "out of memory" (cuBLAS/cuDNN
    allocation failures, errors wrapped by torch.compile) or "can't allocate memory"
    (the CPU allocator), anywhere in the chain of causes."""
    return any(_is_oom_one(e) for e in exception_chain(exc))


def _first_line(exc: BaseException) -> str:
    """The first line of the out-of-memory error's own message."""
    culprit = next((e for e in exception_chain(exc) if _is_oom_one(e)), exc)
    text = str(culprit).strip()
    return text.splitlines()[0].strip() if text else type(culprit).__name__


def as_oom(exc: BaseException, *, batch_size: int, peak_memory_bytes: int | None = None, **fields: Any) -> WorkloadOutOfMemory | None:
    """The protocol-ready WorkloadOutOfMemory for a framework exception, or None if it is not one.
    The message is the framework's first line (e.g. "CUDA out of memory. Tried to ...")."""
    if not is_oom(exc):
        return None
    return WorkloadOutOfMemory(_first_line(exc), batch_size=batch_size, peak_memory_bytes=peak_memory_bytes, **fields)


# --- precision -----------------------------------------------------------------------


def set_tf32(torch, enabled: bool) -> bool:
    """Allow (or forbid) TF32 for fp32 matmuls and cuDNN convolutions; returns whether
    matmuls now may use TF32.

    Uses the legacy switches (``set_float32_matmul_precision`` + ``allow_tf32``) on
    purpose: they also set the newer per-backend ``fp32_precision`` state consistently,
    whereas writing the new API leaves the legacy getters raising "mix of the legacy and
    new APIs" errors, and torch.compile (inductor) and transformers still read them."""
    with warnings.catch_warnings():  # newer torch may call the legacy switches deprecated
        warnings.simplefilter("ignore")
        torch.set_float32_matmul_precision("high" if enabled else "highest")
        torch.backends.cuda.matmul.allow_tf32 = enabled
        torch.backends.cudnn.allow_tf32 = enabled
        return torch.get_float32_matmul_precision() != "highest"


def _autocast(torch, device, precision: str):
    if precision == "bf16":
        return lambda: torch.autocast(device_type=device.type, dtype=torch.bfloat16)
    if precision == "fp16":
        return lambda: torch.autocast(device_type=device.type, dtype=torch.float16)
    return contextlib.nullcontext


# --- models --------------------------------------------------------------------------


def build_model(mods: dict[str, ModuleType], name: str, *, attn: str = "sdpa"):
    """The model with random weights on the current default device."""
    spec = MODELS[name]
    if spec.kind == "cnn":
        return getattr(mods["torchvision"].models, TORCHVISION_BUILDERS[name])(weights=None, num_classes=NUM_CLASSES)
    tf = mods["transformers"]
    if name == "bert_large":
        config_cls, model_cls, params = tf.BertConfig, tf.BertForSequenceClassification, TRANSFORMER_CONFIGS["bert_large"]
    elif name == "distilbert":
        config_cls, model_cls, params = tf.DistilBertConfig, tf.DistilBertForSequenceClassification, TRANSFORMER_CONFIGS["distilbert"]
    else:
        raise ValueError(f"no PyTorch builder for {name!r}")
    # pad_token_id=None: without it, every eager forward without an attention mask
    # checks input_ids for padding, a device->host copy (a sync) per step.  Padded
    # batches (the host pipeline) pass an attention mask instead.
    for impl in (attn, "eager") if attn != "eager" else ("eager",):
        config = config_cls(**params, num_labels=NUM_LABELS, pad_token_id=None, attn_implementation=impl)
        try:
            model = model_cls(config)
        except (ValueError, ImportError):  # this transformers has no SDPA path for the model
            continue
        return model
    raise RuntimeError(f"cannot build {name}")


def attention_of(model) -> str | None:
    config = getattr(model, "config", None)
    return getattr(config, "_attn_implementation", None) if config is not None else None


class _WithLoss:
    """model + cross-entropy as one callable module (what torch.compile compiles)."""

    @staticmethod
    def make(torch, model, kind: str):
        F = torch.nn.functional

        class WithLoss(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, x, y, mask=None):
                if kind == "cnn":
                    logits = self.model(x)
                else:
                    logits = self.model(input_ids=x, attention_mask=mask).logits
                return F.cross_entropy(logits.float(), y)

        return WithLoss()


# --- FLOPs ---------------------------------------------------------------------------


def _conv_backward_flop(grad_out_shape, x_shape, w_shape, _bias, _stride, _padding, _dilation, transposed,
                        _output_padding, _groups, output_mask, out_shape=None, **kwargs) -> int:  # fmt: skip
    """Groups-aware FLOPs of aten.convolution_backward.  Every multiply-add of the
    forward convolution has exactly one partner in grad_input and one in grad_weight,
    so each is the forward count: 2 * N * prod(w_shape) * prod(spatial of the
    non-transposed output), where w_shape = (C_out, C_in / groups, *kernel)."""
    spatial = x_shape[2:] if transposed else grad_out_shape[2:]
    forward = 2 * grad_out_shape[0] * math.prod(w_shape) * math.prod(spatial)
    return forward * (int(bool(output_mask[0])) + int(bool(output_mask[1])))


def count_train_flops(mods: dict[str, ModuleType], name: str, *, image_size: int | None, seq_len: int | None) -> float | None:
    """Training FLOPs (forward + backward) of one sample, counted on the meta device."""
    torch = mods["torch"]
    from torch.utils.flop_counter import FlopCounterMode

    spec = MODELS[name]
    with torch.device("meta"):
        model = build_model(mods, name, attn="eager")
        model.train()
        if spec.kind == "cnn":
            x = torch.empty(1, 3, image_size, image_size)
        else:
            x = torch.zeros(1, seq_len, dtype=torch.long)
        y = torch.zeros(1, dtype=torch.long)
        step = _WithLoss.make(torch, model, spec.kind)
        counter = FlopCounterMode(display=False, custom_mapping={torch.ops.aten.convolution_backward: _conv_backward_flop})
        with counter:
            step(x, y).backward()
    return float(counter.get_total_flops())


# --- input pipelines -----------------------------------------------------------------


class _ForeverShuffled:
    """A sampler that never ends: one shuffled pass over the data after another."""

    def __init__(self, n: int, seed: int = 0) -> None:
        self.n = n
        self.seed = seed

    def __iter__(self):
        import numpy as np

        rng = np.random.default_rng(self.seed)
        while True:
            yield from rng.permutation(self.n).tolist()


class _PerProcessRng:
    """A numpy Generator per process (each forked DataLoader worker gets its own)."""

    def __init__(self) -> None:
        self._pid: int | None = None
        self._rng: Any = None  # numpy's Generator, made in the worker process that uses it

    def get(self):
        import numpy as np

        pid = os.getpid()
        if self._pid != pid:
            self._pid, self._rng = pid, np.random.default_rng([pid, int.from_bytes(os.urandom(4), "little")])
        return self._rng


class ImageFolderDataset:
    """Decode + augment one generated PNG per item (runs in the DataLoader workers)."""

    def __init__(self, files: list[tuple[str, int]], size: int, level: str) -> None:
        self.files, self.size, self.level = files, size, level
        self._rng = _PerProcessRng()

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int):
        import torch

        path, label = self.files[index]
        return torch.from_numpy(images.augment(path, self.size, self.level, self._rng.get())), label


class TextDataset:
    """Tokenize one generated text per item (runs in the DataLoader workers)."""

    def __init__(self, texts: list[str], labels: list[int], tokenizer_path: str, seq_len: int) -> None:
        self.texts, self.labels, self.tokenizer_path, self.seq_len = texts, labels, tokenizer_path, seq_len
        self._tok: Any = None  # a tokenizer, loaded in each worker process
        self._pid: int | None = None

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, index: int):
        import torch

        if self._pid != os.getpid():
            self._tok, self._pid = images.load_tokenizer(self.tokenizer_path, self.seq_len), os.getpid()
        ids, mask = images.encode(self._tok, self.texts[index])
        return torch.from_numpy(ids), torch.from_numpy(mask), self.labels[index]


def host_loader(torch, kind: str, *, batch_size: int, workers: int, image_size: int | None, seq_len: int | None,
                augment: str, pin_memory: bool):  # fmt: skip
    dataset: ImageFolderDataset | TextDataset
    if kind == "cnn":
        assert image_size is not None, "a CNN's pipeline needs image_size"
        dataset = ImageFolderDataset(images.ensure_image_dataset(), image_size, augment)
    else:
        assert seq_len is not None, "a transformer's pipeline needs seq_len"
        texts, labels, tokenizer_path = images.ensure_text_dataset()
        dataset = TextDataset(texts, labels, tokenizer_path, seq_len)
    extra = {"persistent_workers": True, "prefetch_factor": 4} if workers > 0 else {}
    return torch.utils.data.DataLoader(
        dataset, batch_size=batch_size, sampler=_ForeverShuffled(len(dataset)), num_workers=workers,
        pin_memory=pin_memory, drop_last=True, **extra,
    )  # fmt: skip


# --- the run -------------------------------------------------------------------------


def _peak_memory_fn(torch, device):
    if device.type == "cuda":
        return lambda: int(torch.cuda.max_memory_allocated(device)), "torch.cuda.max_memory_allocated"

    return peak_rss_bytes, "ru_maxrss"


def run(args, emitter: Emitter, *, mark=None) -> ResultLine:
    """Build, warm up and measure; return the result fields.  Raises MissingFramework,
    WorkloadOutOfMemory (after the framework's OOM, with the protocol fields) or ValueError."""
    spec = MODELS[args.model]
    mods = import_frameworks(spec.kind)
    torch = mods["torch"]
    image_size = (args.image_size or spec.image_size) if spec.kind == "cnn" else None
    seq_len = (args.seq_len or spec.seq_len) if spec.kind == "transformer" else None
    if seq_len is not None and seq_len > 512:
        raise ValueError("--seq-len: at most 512 (the models' position embeddings)")

    if args.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        if args.device == "cuda" and not torch.cuda.is_available():
            raise ValueError("--device cuda: torch sees no CUDA device")
        device = torch.device(args.device)
    if device.type == "cuda":
        # A rank of a data-parallel run takes the GPU of its local rank (one process per GPU).
        local = int(os.environ.get("LOCAL_RANK", device.index or 0)) if under_torchrun() else device.index or 0
        torch.cuda.set_device(local)
        device = torch.device("cuda", torch.cuda.current_device())
    peak_memory, peak_source = _peak_memory_fn(torch, device)
    info = RunInfo(framework="torch", model=args.model, precision=args.precision)
    try:
        with data_parallel(torch, device, emitter):
            return _run(args, emitter, mods, spec, device, image_size, seq_len, info, peak_memory, peak_source, mark)
    except BaseException as exc:
        oom = as_oom(exc, batch_size=args.batch_size, peak_memory_bytes=peak_memory(), **info)
        if oom is not None:
            raise oom from None
        raise


def under_torchrun() -> bool:
    """Started by torchrun (it sets RANK and WORLD_SIZE), even as its only rank."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


@contextlib.contextmanager
def data_parallel(torch, device, emitter: Emitter):
    """Under torchrun: the process group, NCCL on GPUs and gloo on the CPU, from
    torchrun's environment (MASTER_ADDR, RANK, WORLD_SIZE); torn down after.  A single
    rank runs DDP too (the same NCCL path as on many GPUs); its protocol lines carry no
    rank (see protocol.Emitter).  Otherwise nothing."""
    if not under_torchrun():
        yield None
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    torch.distributed.init_process_group(backend=backend, **({"device_id": device} if device.type == "cuda" else {}))
    try:
        yield backend
    finally:
        torch.distributed.destroy_process_group()


def wrap_data_parallel(torch, model, device):
    """The model in DistributedDataParallel when a process group is up: gradients are
    averaged across ranks in backward (each step waits for the slowest rank)."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return model
    return torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)


def _run(args, emitter, mods, spec, device, image_size, seq_len, info, peak_memory, peak_source, mark):
    torch = mods["torch"]
    precision = args.precision
    tf32 = set_tf32(torch, precision != "fp32")
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    bs = args.batch_size
    channels_last = bool(args.channels_last and spec.kind == "cnn")

    try:
        flops = count_train_flops(mods, args.model, image_size=image_size, seq_len=seq_len)
    except Exception as exc:  # counting is a nicety; never fail the run for it
        print(f"gputui.workloads: could not count FLOPs ({type(exc).__name__}: {exc})", file=sys.stderr)
        flops = None

    torch.manual_seed(0)
    with torch.device(device):
        model = build_model(mods, args.model)
    model.train()
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    module = _WithLoss.make(torch, wrap_data_parallel(torch, model, device), spec.kind)

    params = [p for p in model.parameters() if p.requires_grad]
    opt_cls, opt_kw = (
        (torch.optim.SGD, {"lr": 0.01, "momentum": 0.9}) if spec.kind == "cnn"
        else (torch.optim.AdamW, {"lr": 2e-5, "weight_decay": 0.01})
    )  # fmt: skip
    for fast in ({"fused": True}, {"foreach": True}, {}):  # fused kernels where this torch has them
        try:
            optimizer = opt_cls(params, **opt_kw, **fast)
            break
        except (TypeError, RuntimeError, ValueError):
            continue
    scaler = torch.amp.GradScaler(device.type) if precision == "fp16" else None
    autocast = _autocast(torch, device, precision)

    forward = module
    compile_mode = getattr(args, "compile_mode", "default") or "default"
    if args.compile:
        forward = torch.compile(module, mode=None if compile_mode == "default" else compile_mode, dynamic=False)
    mark_cudagraph_step = bool(args.compile and device.type == "cuda" and hasattr(torch, "compiler")
                               and hasattr(torch.compiler, "cudagraph_mark_step_begin"))  # fmt: skip

    memory_format = torch.channels_last if channels_last else torch.contiguous_format
    loader_iter = None
    if args.pipeline == "synthetic":
        g = torch.Generator(device=device).manual_seed(0)
        if spec.kind == "cnn":
            x = torch.randn(bs, 3, image_size, image_size, device=device, generator=g).contiguous(memory_format=memory_format)
            y = torch.randint(0, NUM_CLASSES, (bs,), device=device, generator=g)
        else:
            x = torch.randint(0, model.config.vocab_size, (bs, seq_len), device=device, generator=g)
            y = torch.randint(0, NUM_LABELS, (bs,), device=device, generator=g)
        fixed = (x, y, None)

        def next_batch():
            return fixed
    else:
        loader = host_loader(torch, spec.kind, batch_size=bs, workers=args.workers, image_size=image_size,
                             seq_len=seq_len, augment=args.augment, pin_memory=device.type == "cuda")  # fmt: skip
        loader_iter = iter(loader)
        non_blocking = device.type == "cuda"

        def next_batch():
            batch = next(loader_iter)
            if spec.kind == "cnn":
                xb, yb = batch
                xb = xb.to(device, non_blocking=non_blocking).contiguous(memory_format=memory_format)
                return xb, yb.to(device, non_blocking=non_blocking), None
            ids, mask, yb = batch
            return (ids.to(device, non_blocking=non_blocking), yb.to(device, non_blocking=non_blocking),
                    mask.to(device, non_blocking=non_blocking))  # fmt: skip

    def step() -> None:
        xb, yb, mask = next_batch()
        if mark_cudagraph_step:
            torch.compiler.cudagraph_mark_step_begin()
        optimizer.zero_grad(set_to_none=True)
        with autocast():
            loss = forward(xb, yb, mask) if mask is not None else forward(xb, yb)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        else:
            loss.backward()
            optimizer.step()

    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)

    start = {
        **info,
        "title": spec.title,
        "device": device.type,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "torch_version": torch.__version__,
        "library_version": getattr(mods.get("torchvision") or mods.get("transformers"), "__version__", None),
        "batch_size": bs,
        "steps": args.steps,
        "warmup_steps": args.warmup_steps,
        "method": args.method,
        "epochs": args.epochs if args.method == "tf-metal" else None,
        "pipeline": args.pipeline,
        "workers": args.workers if args.pipeline == "host" else None,
        "augment": args.augment if args.pipeline == "host" and spec.kind == "cnn" else None,
        "image_size": image_size,
        "seq_len": seq_len,
        "channels_last": channels_last,
        "compile": bool(args.compile),
        "compile_mode": compile_mode if args.compile else None,
        "tf32": tf32,
        "attention": attention_of(model),
        "optimizer": type(optimizer).__name__ + (" (fused)" if fast.get("fused") else " (foreach)" if fast else ""),
        "flops_per_sample": flops,
        "peak_memory_source": peak_source,
        "pid": os.getpid(),
        "backend": torch.distributed.get_backend() if torch.distributed.is_initialized() else None,
        "world_size": torch.distributed.get_world_size() if torch.distributed.is_initialized() else None,
    }
    emitter.start(**start)
    try:
        result = measure(
            step, sync, batch_size=bs, warmup_steps=args.warmup_steps, steps=args.steps, emitter=emitter,
            method=args.method, epochs=args.epochs, flops_per_sample=flops, peak_memory=peak_memory,
            info={**info, "device": device.type, "peak_memory_source": peak_source}, mark=mark,
        )  # fmt: skip
    finally:
        if loader_iter is not None:
            shutdown = getattr(loader_iter, "_shutdown_workers", None)
            if shutdown is not None:
                with contextlib.suppress(Exception):
                    shutdown()
    return result
