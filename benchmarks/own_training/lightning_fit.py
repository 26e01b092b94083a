"""Image classifier trained with Lightning's ``L.Trainer(...).fit``.

Follows the Lightning quickstart / LightningModule docs: a LightningModule with
training_step + configure_optimizers, ``self.log(..., prog_bar=True)``, a
DataLoader passed to ``trainer.fit``, the default TQDMProgressBar (or
RichProgressBar with --rich), and a user Callback that prints a throughput
figure at the end. Data are synthetic; nothing is downloaded.

    python lightning_fit.py --variant fed --seconds 40
    python lightning_fit.py --variant python-bound --device cpu --seconds 10
"""

import argparse
import os
import tempfile
import time
from datetime import timedelta

import lightning as L
import torch
import torch.nn.functional as F
from lightning.pytorch.callbacks import TQDMProgressBar
from torch.utils.data import DataLoader
from vision_models import PrecomputedImages, RawImages, ResNet18, SmallCNN  # beside this script


def parse_args():
    p = argparse.ArgumentParser(description="Lightning fit on synthetic images")
    p.add_argument("--variant", choices=["fed", "starved", "python-bound"], default="fed")
    p.add_argument("--seconds", type=float, default=40.0, help="approximate training time (Trainer max_time)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--num-workers", type=int, default=None)
    p.add_argument("--arch", default="auto", help="resnet18 | resnet50 | smallcnn; auto: resnet18 on cuda, smallcnn on cpu")
    p.add_argument("--image-size", type=int, default=None)
    p.add_argument("--aug-passes", type=int, default=None, help="starved variant: blur/jitter passes per sample (default 8 on cuda, 60 on cpu)")
    p.add_argument("--max-epochs", type=int, default=1000)
    p.add_argument("--max-steps", type=int, default=-1)
    p.add_argument("--rich", action="store_true", help="RichProgressBar instead of TQDMProgressBar")
    p.add_argument("--root-dir", default=None, help="Trainer default_root_dir (default: a temp dir)")
    return p.parse_args()


# ---------------------------------------------------------------- data
# ---------------------------------------------------------------- models
def build_model(arch, num_classes):
    if arch == "smallcnn":
        return SmallCNN(num_classes)
    try:
        import torchvision

        return torchvision.models.get_model(arch, weights=None, num_classes=num_classes)
    except ImportError:
        if arch != "resnet18":
            raise
        return ResNet18(num_classes)


# ---------------------------------------------------------------- lightning
class LitClassifier(L.LightningModule):
    def __init__(self, arch="smallcnn", num_classes=1000, lr=1e-3, per_step_loss_readout=False):
        super().__init__()
        self.save_hyperparameters()
        self.model = build_model(arch, num_classes)
        self.recent_losses = []

    def forward(self, x):
        return self.model(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        self.log("train_loss", loss, prog_bar=True)
        if self.hparams.per_step_loss_readout:
            # keep a Python-side history of the loss, read back every step
            self.recent_losses.append(loss.item())
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


class ThroughputCallback(L.Callback):
    """Times training batches and prints samples/s when training ends.

    The first `warmup_steps` batches are skipped as warm-up (DataLoader worker
    start-up, cudnn autotuning, allocator growth)."""

    def __init__(self, warmup_steps=5):
        self.warmup_steps = warmup_steps
        self.steps = 0
        self.samples = 0
        self.t0 = self.t1 = None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.steps += 1
        if self.steps == self.warmup_steps:
            self.t0 = time.perf_counter()
        elif self.steps > self.warmup_steps:
            self.samples += batch[0].size(0)
            self.t1 = time.perf_counter()

    def on_train_end(self, trainer, pl_module):
        if self.t1 is None:
            print("train throughput: n/a (too few steps)", flush=True)
            return
        print(f"train throughput: {self.samples / (self.t1 - self.t0):.1f} samples/s", flush=True)


def main():
    args = parse_args()
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    cuda = args.device == "cuda"
    if args.arch == "auto":
        args.arch = "resnet18" if cuda else "smallcnn"
    if args.image_size is None:
        args.image_size = 224 if cuda else 64
    if args.batch_size is None:
        args.batch_size = 2 if args.variant == "python-bound" else (256 if cuda else 32)
    if args.num_workers is None:
        args.num_workers = min(4, os.cpu_count() or 1) if args.variant == "fed" else 0

    L.seed_everything(42)
    length = 200_000
    if args.variant == "starved":
        dataset = RawImages(length, args.image_size, 1000, args.aug_passes or (8 if cuda else 60))
    else:
        dataset = PrecomputedImages(length, args.image_size, 1000)
    extra = dict(persistent_workers=True, prefetch_factor=4) if args.num_workers > 0 else {}
    train_loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True, num_workers=args.num_workers, pin_memory=cuda, drop_last=True, **extra)

    model = LitClassifier(arch=args.arch, per_step_loss_readout=args.variant == "python-bound")

    progress_bar = TQDMProgressBar()
    if args.rich:
        try:
            import rich  # noqa: F401
            from lightning.pytorch.callbacks import RichProgressBar

            progress_bar = RichProgressBar()
        except ImportError:
            print("rich is not installed; using the TQDM progress bar", flush=True)

    precision = "bf16-mixed" if cuda and torch.cuda.is_bf16_supported() else "32-true"
    trainer = L.Trainer(
        accelerator="gpu" if cuda else "cpu",
        devices=1,
        precision=precision,
        max_epochs=args.max_epochs,
        max_steps=args.max_steps,
        max_time=timedelta(seconds=args.seconds),
        callbacks=[progress_bar, ThroughputCallback(warmup_steps=5)],
        log_every_n_steps=10,
        default_root_dir=args.root_dir or os.path.join(tempfile.gettempdir(), "lightning_fit"),
    )
    trainer.fit(model, train_dataloaders=train_loader)


if __name__ == "__main__":
    main()
