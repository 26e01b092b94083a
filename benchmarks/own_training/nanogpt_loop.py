"""nanoGPT-style training script on synthetic tokens.

Model and loop follow karpathy/nanoGPT (model.py: GPT = token/position
embeddings, Blocks of LayerNorm + CausalSelfAttention + MLP, tied lm_head;
train.py: get_batch() sampling random windows from one token array -- no
DataLoader --, AdamW via configure_optimizers, autocast, GradScaler, gradient
accumulation with the next batch fetched while the GPU works, grad clipping,
cosine lr, "iter N: loss ..., time ...ms" every log_interval). Like llm.c /
build-nanogpt it also prints a tok/s figure. The token array is random
(np.random, no np.memmap of a prepared .bin), so nothing is downloaded.

    python nanogpt_loop.py --variant fed --seconds 40
    python nanogpt_loop.py --variant starved --device cpu --seconds 10
"""

import argparse
import inspect
import math
import statistics
import time
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
from torch.nn import functional as F

# -----------------------------------------------------------------------------
# model (after nanoGPT model.py)


class LayerNorm(nn.Module):
    """LayerNorm but with an optional bias. PyTorch doesn't support simply bias=False"""

    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, input):
        return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_head == 0
        # key, query, value projections for all heads, but in a batch
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        # output projection
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.attn_dropout = nn.Dropout(config.dropout)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.n_embd = config.n_embd
        self.dropout = config.dropout

    def forward(self, x):
        B, T, C = x.size()  # batch size, sequence length, embedding dimensionality (n_embd)
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        # causal self-attention; flash attention kernels via scaled_dot_product_attention
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=self.dropout if self.training else 0, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble all head outputs side by side
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


@dataclass
class GPTConfig:
    block_size: int = 1024
    vocab_size: int = 50304
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd),
                wpe=nn.Embedding(config.block_size, config.n_embd),
                drop=nn.Dropout(config.dropout),
                h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
                ln_f=LayerNorm(config.n_embd, bias=config.bias),
            )
        )
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        # apply special scaled init to the residual projections, per GPT-2 paper
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))
        print("number of parameters: %.2fM" % (self.get_num_params() / 1e6,))  # noqa: UP031

    def get_num_params(self, non_embedding=True):
        n_params = sum(p.numel() for p in self.parameters())
        if non_embedding:
            n_params -= self.transformer.wpe.weight.numel()
        return n_params

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):
        device = idx.device
        b, t = idx.size()
        assert t <= self.config.block_size
        pos = torch.arange(0, t, dtype=torch.long, device=device)
        tok_emb = self.transformer.wte(idx)
        pos_emb = self.transformer.wpe(pos)
        x = self.transformer.drop(tok_emb + pos_emb)
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        if targets is not None:
            logits = self.lm_head(x)
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        else:
            logits = self.lm_head(x[:, [-1], :])
            loss = None
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type):
        param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
        decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
        nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
        optim_groups = [
            {"params": decay_params, "weight_decay": weight_decay},
            {"params": nodecay_params, "weight_decay": 0.0},
        ]
        num_decay_params = sum(p.numel() for p in decay_params)
        num_nodecay_params = sum(p.numel() for p in nodecay_params)
        print(f"num decayed parameter tensors: {len(decay_params)}, with {num_decay_params:,} parameters")
        print(f"num non-decayed parameter tensors: {len(nodecay_params)}, with {num_nodecay_params:,} parameters")
        fused_available = "fused" in inspect.signature(torch.optim.AdamW).parameters
        use_fused = fused_available and device_type == "cuda"
        extra_args = dict(fused=True) if use_fused else dict()
        optimizer = torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas, **extra_args)
        print(f"using fused AdamW: {use_fused}")
        return optimizer


# -----------------------------------------------------------------------------
# config / flags


def parse_args():
    p = argparse.ArgumentParser(description="nanoGPT-style training on synthetic tokens")
    p.add_argument("--variant", choices=["fed", "starved", "python-bound"], default="fed")
    p.add_argument("--seconds", type=float, default=40.0, help="approximate training time")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--batch-size", type=int, default=None, help="micro-batch size")
    p.add_argument("--block-size", type=int, default=None)
    p.add_argument("--n-layer", type=int, default=None)
    p.add_argument("--n-head", type=int, default=None)
    p.add_argument("--n-embd", type=int, default=None)
    p.add_argument("--vocab-size", type=int, default=65, help="65 = shakespeare_char")
    p.add_argument("--gradient-accumulation-steps", type=int, default=None)
    p.add_argument("--log-interval", type=int, default=None)
    p.add_argument("--compile", action="store_true", help="torch.compile the model (slow start)")
    p.add_argument(
        "--text-expansion", type=int, default=None, help="starved variant: raw chars cleaned+encoded in Python per token kept (default 32 on cuda, 1536 on cpu)"
    )
    return p.parse_args()


args = parse_args()
device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
device_type = "cuda" if "cuda" in device else "cpu"
on_gpu = device_type == "cuda"
# cuda defaults: config/train_shakespeare_char.py; cpu defaults: the README's
# "baby GPT on a CPU" (block 64, batch 12, 4 layers, 4 heads, 128 embd)
batch_size = args.batch_size or (2 if args.variant == "python-bound" else (64 if on_gpu else 12))
block_size = args.block_size or (256 if on_gpu else 64)
n_layer = args.n_layer or (6 if on_gpu else 4)
n_head = args.n_head or (6 if on_gpu else 4)
n_embd = args.n_embd or (384 if on_gpu else 128)
gradient_accumulation_steps = args.gradient_accumulation_steps or (1 if args.variant == "python-bound" else 4)
log_interval = args.log_interval or (50 if args.variant == "python-bound" else 10)
dropout = 0.0
learning_rate = 1e-3
max_iters = 1_000_000  # the run is stopped by --seconds
weight_decay = 1e-1
beta1, beta2 = 0.9, 0.99
grad_clip = 1.0
warmup_iters = 100
lr_decay_iters = 5000
min_lr = 1e-4
dtype = "bfloat16" if on_gpu and torch.cuda.is_bf16_supported() else ("float16" if on_gpu else "float32")

tokens_per_iter = gradient_accumulation_steps * batch_size * block_size
print(f"tokens per iteration will be: {tokens_per_iter:,}", flush=True)

torch.manual_seed(1337)
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
ctx = nullcontext() if device_type == "cpu" else torch.amp.autocast(device_type=device_type, dtype=ptdtype)

# -----------------------------------------------------------------------------
# data: nanoGPT memory-maps data/<dataset>/train.bin; here one random token array.
# "starved": the raw text is encoded on the fly, char by char in Python, for
# every batch (a per-batch CPU cost in the main process, like a tokenizer).
rng = np.random.default_rng(1337)
train_data = rng.integers(0, args.vocab_size, size=2_000_000, dtype=np.uint16)
chars = [chr(c) for c in range(32, 32 + args.vocab_size)]
stoi = {ch: i for i, ch in enumerate(chars)}
text_expansion = args.text_expansion or (32 if on_gpu else 1536)
raw_text = "".join(rng.choice(chars, size=max(200_000, 4 * text_expansion * (block_size + 1)))) if args.variant == "starved" else ""


def encode(s):
    return [stoi[c] for c in s]


def get_batch(split):
    if args.variant == "starved":
        x_rows, y_rows = [], []
        span = text_expansion * (block_size + 1)
        for i in torch.randint(len(raw_text) - span, (batch_size,)).tolist():
            # clean + encode a window of raw text in pure Python, keep every n-th char
            window = "".join(c for c in raw_text[i : i + span] if c.isprintable())
            ids = encode(window)
            ids = ids[::text_expansion][: block_size + 1]
            x_rows.append(ids[:block_size])
            y_rows.append(ids[1 : block_size + 1])
        x = torch.tensor(x_rows, dtype=torch.int64)
        y = torch.tensor(y_rows, dtype=torch.int64)
    else:
        data = train_data
        ix = torch.randint(len(data) - block_size, (batch_size,))
        x = torch.stack([torch.from_numpy((data[i : i + block_size]).astype(np.int64)) for i in ix])
        y = torch.stack([torch.from_numpy((data[i + 1 : i + 1 + block_size]).astype(np.int64)) for i in ix])
    if device_type == "cuda":
        # pin arrays x,y, which allows us to move them to GPU asynchronously (non_blocking=True)
        x, y = x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
    else:
        x, y = x.to(device), y.to(device)
    return x, y


# -----------------------------------------------------------------------------
# model init
model_args = dict(n_layer=n_layer, n_head=n_head, n_embd=n_embd, block_size=block_size, bias=False, vocab_size=args.vocab_size, dropout=dropout)
model = GPT(GPTConfig(**model_args))
model.to(device)
scaler = torch.amp.GradScaler(device_type, enabled=(dtype == "float16"))
optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2), device_type)
if args.compile:
    print("compiling the model... (takes a ~minute)")
    model = torch.compile(model)


def get_lr(it):
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


# -----------------------------------------------------------------------------
# training loop
X, Y = get_batch("train")  # fetch the very first batch
t0 = time.time()
t_start = t0
iter_num = 0
local_iter_num = 0
tokps_history = []
loss_history = []
while True:
    lr = get_lr(iter_num)
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr

    for micro_step in range(gradient_accumulation_steps):  # noqa: B007
        with ctx:
            logits, loss = model(X, Y)
            loss = loss / gradient_accumulation_steps
        # immediately async prefetch next batch while model is doing the forward pass on the GPU
        X, Y = get_batch("train")
        scaler.scale(loss).backward()
        if args.variant == "python-bound":
            loss_history.append(loss.item() * gradient_accumulation_steps)  # per-step readout
    if grad_clip != 0.0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)

    # timing and logging
    t1 = time.time()
    dt = t1 - t0
    t0 = t1
    if iter_num % log_interval == 0:
        # get loss as float. note: this is a CPU-GPU sync point
        lossf = loss.item() * gradient_accumulation_steps
        tokps = tokens_per_iter / dt
        if local_iter_num >= 5:  # let the first iterations warm up
            tokps_history.append(tokps)
        print(f"iter {iter_num}: loss {lossf:.4f}, time {dt * 1000:.2f}ms, tok/s {tokps:.0f}", flush=True)
    iter_num += 1
    local_iter_num += 1

    if iter_num > max_iters or t1 - t_start > args.seconds:
        break

if tokps_history:
    print(f"final: {statistics.median(tokps_history):.0f} tok/s", flush=True)
else:
    print(f"final: {tokens_per_iter * iter_num / (time.time() - t_start):.0f} tok/s", flush=True)
