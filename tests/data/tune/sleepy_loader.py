"""A training loop whose training DataLoader waits on its samples: each one sleeps
``--sleep-ms`` (a slow disk or a remote store), so that workers, fetching in parallel,
feed it faster on any machine, two cores included.  Written as users write a PyTorch
loop (``pytorch/examples`` mnist/main.py's ``train()``: ``for data, target in
train_loader``, ``optimizer.zero_grad()``, ``loss.backward()``, ``optimizer.step()``),
with an evaluation loader that does not shuffle.  Runs until stopped, or ``--steps``.

``--work-ms`` makes each training step compute that long (a bigger model): with no
sleep, a fed loop.  ``--fd-headroom N`` lowers its open-file limit to N above the files
it has open: a box whose ``ulimit -n`` is too small for the workers' pipes, where torch's
workers fail with "Too many open files"."""

import argparse
import os
import resource
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SlowSamples(Dataset):
    def __init__(self, n, sleep_s):
        self.n, self.sleep_s = n, sleep_s

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        time.sleep(self.sleep_s)
        return torch.full((16,), float(i % 7)), i % 2


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--sleep-ms", type=float, default=20.0)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--steps", type=int, default=10**9)
    p.add_argument("--work-ms", type=float, default=0.0)
    p.add_argument("--fd-headroom", type=int, default=None)
    args = p.parse_args()
    if args.fd_headroom is not None:
        limit = len(os.listdir("/proc/self/fd")) + args.fd_headroom
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
    torch.set_num_threads(1)
    train_loader = DataLoader(SlowSamples(10_000, args.sleep_ms / 1000), batch_size=args.batch_size, shuffle=True, num_workers=args.workers)
    test_loader = DataLoader(SlowSamples(64, 0.0), batch_size=16)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    step = 0
    while step < args.steps:
        model.train()
        for data, target in train_loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(data), target)
            loss.backward()
            optimizer.step()
            busy_until = time.perf_counter() + args.work_ms / 1000
            while time.perf_counter() < busy_until:
                torch.mm(data.T, data)
            step += 1
            if step % 50 == 0:
                print(f"step {step} loss {loss.item():.4f}", flush=True)
            if step >= args.steps:
                break
        model.eval()
        with torch.no_grad():
            for data, _target in test_loader:
                model(data)


if __name__ == "__main__":
    main()
