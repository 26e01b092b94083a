"""Fine-tune a BERT-style sequence classifier with the Hugging Face Trainer.

Follows transformers' examples/pytorch/text-classification/run_glue.py and the
Trainer docs: a model built from a config, TrainingArguments + Trainer,
``train_result = trainer.train()``, ``trainer.log_metrics("train", metrics)``.
Differences, so that it runs without network: the model is
``BertForSequenceClassification(BertConfig(...))`` with random weights (no
from_pretrained) and the dataset is synthetic (random token ids and labels,
a torch Dataset -- no `datasets`, no tokenizer download).

    python hf_trainer.py --variant fed --seconds 40
    python hf_trainer.py --variant starved --device cpu --seconds 10
"""

import argparse
import os
import random
import statistics
import tempfile
import time

# PyTorch-only script: keep transformers 4.x from importing TensorFlow when
# both are installed (a TF import in the same process slows CPU torch a lot).
os.environ.setdefault("USE_TF", "0")

import torch
from torch.utils.data import DataLoader, Dataset
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    Trainer,
    TrainingArguments,
    set_seed,
)


def parse_args():
    p = argparse.ArgumentParser(description="HF Trainer on a synthetic GLUE-like task")
    p.add_argument("--variant", choices=["fed", "starved", "python-bound"], default="fed")
    p.add_argument("--seconds", type=float, default=40.0, help="approximate training time (max_steps is sized from a short timing run)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--batch-size", type=int, default=None, help="per_device_train_batch_size")
    p.add_argument("--num-workers", type=int, default=None, help="dataloader_num_workers")
    p.add_argument(
        "--model-size",
        choices=["tiny", "mini", "small", "base"],
        default=None,
        help="BERT miniature dims (tiny L2/H128, mini L4/H256, small L4/H512) or base (BERT-base, L12/H768); default: small on cuda, tiny on cpu",
    )
    p.add_argument("--words-per-text", type=int, default=None, help="starved variant: words tokenized per sample (default 512 on cuda, 2048 on cpu)")
    p.add_argument("--max-seq-length", type=int, default=128)
    p.add_argument("--max-steps", type=int, default=None, help="fixed max_steps instead of --seconds")
    p.add_argument("--output-dir", default=None, help="default: a temporary directory")
    return p.parse_args()


# ---------------------------------------------------------------- data
class SyntheticGlue(Dataset):
    """Pre-tokenized examples: {'input_ids', 'token_type_ids', 'attention_mask', 'labels'}."""

    def __init__(self, length, seq_len, vocab_size, num_labels, pool=1024):
        g = torch.Generator().manual_seed(0)
        self.input_ids = torch.randint(1000, vocab_size, (pool, seq_len), generator=g)
        self.input_ids[:, 0] = 101  # [CLS]
        self.labels = torch.randint(0, num_labels, (pool,), generator=g)
        self.length, self.seq_len = length, seq_len

    def __len__(self):
        return self.length

    def __getitem__(self, i):
        j = i % len(self.labels)
        return {
            "input_ids": self.input_ids[j],
            "token_type_ids": torch.zeros(self.seq_len, dtype=torch.long),
            "attention_mask": torch.ones(self.seq_len, dtype=torch.long),
            "labels": self.labels[j],
        }


class TokenizeOnTheFly(Dataset):
    """Raw text, tokenized in __getitem__ by a pure-Python greedy WordPiece.

    The slow-tokenizer-in-the-Dataset pattern: every sample costs milliseconds
    of Python CPU time in whichever process iterates the DataLoader.
    """

    def __init__(self, length, seq_len, vocab_size, num_labels, words_per_text):
        rnd = random.Random(0)
        letters = "abcdefghijklmnopqrstuvwxyz"
        pieces = {"".join(rnd.choice(letters) for _ in range(rnd.randint(2, 6))) for _ in range(vocab_size)}
        self.vocab = {w: i + 1000 for i, w in enumerate(sorted(pieces)[: vocab_size - 1000])}
        self.words = ["".join(rnd.choice(letters) for _ in range(rnd.randint(3, 12))) for _ in range(5000)]
        self.length, self.seq_len, self.num_labels = length, seq_len, num_labels
        self.words_per_text = words_per_text

    def __len__(self):
        return self.length

    def wordpiece(self, word):
        out, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                sub = word[start:end] if start == 0 else "##" + word[start:end]
                if sub in self.vocab or sub.lstrip("#") in self.vocab:
                    out.append(self.vocab.get(sub, self.vocab.get(sub.lstrip("#"))))
                    break
                end -= 1
            if end == start:  # [UNK]
                out.append(100)
                end = start + 1
            start = end
        return out

    def __getitem__(self, i):
        rnd = random.Random(i)
        text = " ".join(rnd.choice(self.words) for _ in range(self.words_per_text))
        ids = [101]
        for word in text.lower().split():
            ids.extend(self.wordpiece(word))
        ids = ids[: self.seq_len - 1] + [102]
        pad = self.seq_len - len(ids)
        return {
            "input_ids": torch.tensor(ids + [0] * pad),
            "token_type_ids": torch.zeros(self.seq_len, dtype=torch.long),
            "attention_mask": torch.tensor([1] * len(ids) + [0] * pad),
            "labels": torch.tensor(rnd.randrange(self.num_labels)),
        }


# ---------------------------------------------------------------- trainer
class LossTrackingTrainer(Trainer):
    """python-bound variant: read the loss back as a Python float every step
    (for a running average / spike check), a per-step device sync."""

    losses = []

    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
        out = super().compute_loss(model, inputs, return_outputs=return_outputs, **kwargs)
        loss = out[0] if return_outputs else out
        self.losses.append(loss.item())
        return out


def estimate_max_steps(model, dataset, batch_size, num_workers, device, bf16, seconds):
    """Size max_steps for ~`seconds` of training: time a few steps with the same
    DataLoader settings first (the Trainer's samples/s figure assumes the run
    reaches max_steps, so the run is not cut short by a clock)."""
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=num_workers)
    opt = torch.optim.AdamW(model.parameters(), lr=0.0, fused=True)  # the Trainer's default optim
    model.to(device).train()
    budget = min(5.0, max(2.0, 0.1 * seconds))
    times = []
    t0 = time.perf_counter()
    for batch in loader:
        batch = {k: v.to(device) for k, v in batch.items()}
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss.item()
        times.append(time.perf_counter())
        if times[-1] - t0 > budget and len(times) >= 5:
            break
    del opt
    model.zero_grad(set_to_none=True)
    times = times[len(times) // 3 :]  # the first steps are warm-up
    per_step = statistics.median(b - a for a, b in zip(times, times[1:]))
    return max(10, int(seconds / per_step))


def main():
    args = parse_args()
    set_seed(42)
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    bf16 = cuda and torch.cuda.is_bf16_supported()
    if args.batch_size is None:
        args.batch_size = 2 if args.variant == "python-bound" else (64 if cuda else 16)
    if args.num_workers is None:
        args.num_workers = min(4, os.cpu_count() or 1) if args.variant == "fed" else 0

    if args.model_size is None:
        args.model_size = "small" if cuda else "tiny"
    layers, hidden = {"tiny": (2, 128), "mini": (4, 256), "small": (4, 512), "base": (12, 768)}[args.model_size]
    # BertConfig() defaults are BERT-base: 12 layers, 768 hidden, 12 heads, 3072 FFN
    config = BertConfig(hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=hidden // 64, intermediate_size=4 * hidden, num_labels=2)
    model = BertForSequenceClassification(config)

    length = 200_000
    if args.variant == "starved":
        train_dataset = TokenizeOnTheFly(length, args.max_seq_length, config.vocab_size, config.num_labels, args.words_per_text or (512 if cuda else 2048))
    else:
        train_dataset = SyntheticGlue(length, args.max_seq_length, config.vocab_size, config.num_labels)

    max_steps = args.max_steps or estimate_max_steps(model, train_dataset, args.batch_size, args.num_workers, device, bf16, args.seconds)

    output_dir = args.output_dir or tempfile.mkdtemp(prefix="hf_trainer_")
    training_args = TrainingArguments(
        output_dir=output_dir,
        per_device_train_batch_size=args.batch_size,
        learning_rate=2e-5,
        max_steps=max_steps,
        logging_steps=max(1, max_steps // 10),
        save_strategy="no",
        report_to="none",
        bf16=bf16,
        use_cpu=not cuda,
        dataloader_num_workers=args.num_workers,
        dataloader_prefetch_factor=4 if args.num_workers > 0 else None,
        disable_tqdm=False,
        seed=42,
    )

    trainer_cls = LossTrackingTrainer if args.variant == "python-bound" else Trainer
    trainer = trainer_cls(model=model, args=training_args, train_dataset=train_dataset)

    train_result = trainer.train()
    metrics = train_result.metrics
    metrics["train_samples"] = max_steps * args.batch_size
    trainer.log_metrics("train", metrics)


if __name__ == "__main__":
    main()
