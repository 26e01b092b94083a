"""What the image scripts of this folder share (one copy for both): their synthetic
datasets (decoded tensors in memory, or raw images augmented per sample in numpy: the
starved variant's CPU work) and their models (a small CNN for CPU runs, ResNet-18 laid
out as torchvision's, for machines without torchvision).  Plain PyTorch; nothing of gputui."""

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import Dataset

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32).reshape(3, 1, 1)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32).reshape(3, 1, 1)


class PrecomputedImages(Dataset):
    """Already-decoded, already-normalized tensors: __getitem__ is an index."""

    def __init__(self, length, image_size, num_classes, pool=256):
        g = torch.Generator().manual_seed(0)
        self.images = torch.randn(pool, 3, image_size, image_size, generator=g)
        self.targets = torch.randint(0, num_classes, (pool,), generator=g)
        self.length = length

    def __len__(self):
        return self.length

    def __getitem__(self, idx):
        j = idx % len(self.images)
        return self.images[j], self.targets[j]


class RawImages(Dataset):
    """uint8 'decoded JPEGs' transformed per sample with numpy on the CPU.

    RandomResizedCrop-ish crop + flip + a few 3x3 blur passes (ColorJitter /
    GaussianBlur stand-in) + ToTensor + Normalize, all in numpy: real CPU work
    per sample, the classic reason a GPU waits on its DataLoader.
    """

    def __init__(self, length, image_size, num_classes, passes, pool=64):
        rng = np.random.default_rng(0)
        self.src_size = image_size + image_size // 7
        self.raw = rng.integers(0, 256, (pool, self.src_size, self.src_size, 3), dtype=np.uint8)
        self.targets = rng.integers(0, num_classes, pool)
        self.length, self.image_size, self.passes = length, image_size, passes

    def __len__(self):
        return self.length

    def __getitem__(self, idx):
        rng = np.random.default_rng(idx)
        img = self.raw[idx % len(self.raw)]
        s = self.image_size
        y, x = rng.integers(0, self.src_size - s + 1, 2)
        img = img[y : y + s, x : x + s].astype(np.float32) / 255.0
        if rng.random() < 0.5:
            img = img[:, ::-1]
        for _ in range(self.passes):  # 3x3 box blur, edge padded
            p = np.pad(img, ((1, 1), (1, 1), (0, 0)), mode="edge")
            img = sum(p[dy : dy + s, dx : dx + s] for dy in range(3) for dx in range(3)) / 9.0
            img = np.clip(img * rng.uniform(0.9, 1.1) + rng.uniform(-0.05, 0.05), 0.0, 1.0)
        chw = (np.ascontiguousarray(img.transpose(2, 0, 1)) - MEAN) / STD
        return torch.from_numpy(chw), int(self.targets[idx % len(self.targets)])


class SmallCNN(nn.Module):
    def __init__(self, num_classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(2),
            nn.Conv2d(64, 128, 3, padding=1),
            nn.BatchNorm2d(128),
            nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1),
        )
        self.fc = nn.Linear(128, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(self.features(x), 1))


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        idt = x if self.down is None else self.down(x)
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + idt)


class ResNet18(nn.Module):
    """Same layout as torchvision.models.resnet18 (used when torchvision is absent)."""

    def __init__(self, num_classes):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        layers, cin = [], 64
        for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
            layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))
