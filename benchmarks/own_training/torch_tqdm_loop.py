"""Plain PyTorch image-classification training loop with a tqdm progress bar.

Written in the style of pytorch/examples imagenet/main.py (model from
torchvision.models with random weights, DataLoader over an image dataset,
CrossEntropyLoss + SGD, train() per epoch), with the ProgressMeter replaced by
``for images, target in tqdm(train_loader)`` as many user scripts do.
The data are synthetic (no download); nothing here knows about any monitor.

    python torch_tqdm_loop.py --variant fed --seconds 40
    python torch_tqdm_loop.py --variant starved --device cpu --seconds 10
"""

import argparse
import os
import time

import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from tqdm import tqdm
from vision_models import PrecomputedImages, RawImages, ResNet18, SmallCNN  # beside this script


def parse_args():
    p = argparse.ArgumentParser(description="PyTorch synthetic ImageNet-style training")
    p.add_argument("--variant", choices=["fed", "starved", "python-bound"], default="fed")
    p.add_argument("--seconds", type=float, default=40.0, help="approximate training time")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("-b", "--batch-size", type=int, default=None)
    p.add_argument("-j", "--workers", type=int, default=None, help="DataLoader workers")
    p.add_argument("-a", "--arch", default="auto", help="resnet18 | resnet50 | ... (torchvision.models) | smallcnn; auto: resnet50 on cuda, smallcnn on cpu")
    p.add_argument("--image-size", type=int, default=None)
    p.add_argument("--aug-passes", type=int, default=None, help="starved variant: blur/jitter passes per sample (default 8 on cuda, 60 on cpu)")
    p.add_argument("--epochs", type=int, default=1000)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--wd", "--weight-decay", type=float, default=1e-4, dest="weight_decay")
    p.add_argument("--num-classes", type=int, default=1000)
    return p.parse_args()


# ---------------------------------------------------------------- data
# ---------------------------------------------------------------- model
def build_model(arch, num_classes):
    if arch == "smallcnn":
        return SmallCNN(num_classes)
    try:
        import torchvision.models as models  # only needed for torchvision archs
    except ImportError:
        print(f"=> torchvision is not installed; creating model 'resnet18' (local copy) instead of '{arch}'", flush=True)
        return ResNet18(num_classes)
    print(f"=> creating model '{arch}'", flush=True)
    return models.__dict__[arch](weights=None, num_classes=num_classes)


# ---------------------------------------------------------------- train
def train(train_loader, model, criterion, optimizer, epoch, device, args, state):
    model.train()
    pbar = tqdm(train_loader, desc=f"Epoch {epoch}", dynamic_ncols=True)
    for i, (images, target) in enumerate(pbar):
        images = images.to(device, non_blocking=True)
        target = target.to(device, non_blocking=True)

        output = model(images)
        loss = criterion(output, target)

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        if args.variant == "python-bound":
            # per-step loss readout (a GPU sync every step)
            state["running_loss"] = 0.98 * state["running_loss"] + 0.02 * loss.item()
            pbar.set_postfix(loss=f"{state['running_loss']:.4f}")
        elif i % 10 == 0:
            pbar.set_postfix(loss=f"{loss.item():.4f}")

        state["step_times"].append(time.perf_counter())
        state["step_samples"].append(images.size(0))
        if time.perf_counter() - state["t_start"] > args.seconds:
            state["done"] = True
            break
    pbar.close()


def main():
    args = parse_args()
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if args.arch == "auto":
        args.arch = "resnet50" if cuda else "smallcnn"
    if args.image_size is None:
        args.image_size = 224 if cuda else 64
    if args.batch_size is None:
        args.batch_size = 2 if args.variant == "python-bound" else (128 if cuda else 32)
    if args.workers is None:
        args.workers = min(4, os.cpu_count() or 1) if args.variant == "fed" else 0

    model = build_model(args.arch, args.num_classes).to(device)
    criterion = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(model.parameters(), args.lr, momentum=args.momentum, weight_decay=args.weight_decay)
    if cuda:
        torch.backends.cudnn.benchmark = True

    length = 100_000
    if args.variant == "starved":
        if args.aug_passes is None:
            args.aug_passes = 8 if cuda else 60
        train_dataset = RawImages(length, args.image_size, args.num_classes, args.aug_passes)
    else:
        train_dataset = PrecomputedImages(length, args.image_size, args.num_classes)

    loader_kwargs = {}
    if args.workers > 0:
        loader_kwargs = dict(persistent_workers=True, prefetch_factor=4)
    train_loader = DataLoader(
        train_dataset, batch_size=args.batch_size, shuffle=True, num_workers=args.workers, pin_memory=cuda, drop_last=True, **loader_kwargs
    )

    state = dict(t_start=time.perf_counter(), step_times=[], step_samples=[], running_loss=0.0, done=False)
    for epoch in range(args.epochs):
        train(train_loader, model, criterion, optimizer, epoch, device, args, state)
        if state["done"]:
            break
    if cuda:
        torch.cuda.synchronize()
        state["step_times"][-1] = time.perf_counter()

    # Throughput over the steady part: skip the first steps (cudnn autotune,
    # worker start-up, allocator warm-up).
    times, samples = state["step_times"], state["step_samples"]
    skip = max(5, len(times) // 10)
    if len(times) > skip + 1:
        n = sum(samples[skip + 1 :])
        dt = times[-1] - times[skip]
    else:
        n, dt = sum(samples), times[-1] - state["t_start"]
    print(f"throughput: {n / dt:.1f} samples/s", flush=True)


if __name__ == "__main__":
    main()
