"""A short PyTorch training loop for checking telemetry on a real GPU.

Trains a small MLP on random data and prints tf-metal style throughput lines, so
gputui's generic parser (not its own protocol) is exercised too.

    python benchmarks/gpu_loop.py [STEPS]    (default 600)
"""

import argparse
import time

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("steps", nargs="?", type=int, default=600)
steps = parser.parse_args().steps

import torch  # after the arguments: --help answers without loading CUDA

batch = 4096
model = torch.nn.Sequential(torch.nn.Linear(4096, 8192), torch.nn.GELU(), torch.nn.Linear(8192, 4096)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(batch, 4096, device="cuda")
began = time.perf_counter()
for step in range(1, steps + 1):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x).float().pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if step % 50 == 0:
        torch.cuda.synchronize()
        now = time.perf_counter()
        print(f"step {step}: {50 * batch / (now - began):.1f} samples/sec", flush=True)
        began = now
