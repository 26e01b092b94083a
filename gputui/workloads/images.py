"""Host-side input data for the ``host`` pipeline, generated locally (nothing is downloaded).

Framework-agnostic (Pillow + numpy only, plus the ``tokenizers`` package for text), so
the PyTorch and TensorFlow workloads share it.

Images: a small rock-paper-scissors-like set (the seed article's data set is 2,136
PNGs of 300x200 in 3 classes): ``per_class`` PNGs of 300x200 per class with a noisy
background and a drawn shape, written once under the cache directory and reused.
:func:`augment` is the per-image CPU work of the pipeline: decode (PIL), random
resized crop to the model's input size, horizontal flip, and for ``heavy`` also a
random rotation, colour jitter (brightness, contrast, saturation), a Gaussian blur and
Lanczos resampling; then to float32 CHW normalized with the ImageNet mean/std.

Text: a generated corpus (sentences of pseudo-words drawn from a generated vocabulary,
3 classes with their own topic words) and a WordPiece tokenizer trained in-process on
that corpus with the Hugging Face ``tokenizers`` library (BERT normalizer and
pre-tokenizer, ``[CLS] ... [SEP]``, padded/truncated to the sequence length); both are
cached next to the images.

Cache directory: ``$GPUTUI_CACHE_DIR``, else ``$XDG_CACHE_HOME/gputui``, else
``~/.cache/gputui``.  Each data set is built in a temporary directory and renamed into
place, so concurrent workers never see half a data set.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

IMAGE_CLASSES = ("rock", "paper", "scissors")
IMAGE_WIDTH, IMAGE_HEIGHT = 300, 200
IMAGES_PER_CLASS = 120
IMAGE_SET = "rps-v1"

AUGMENT_LEVELS = ("light", "heavy")
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)

TEXT_CLASSES = 3
TEXT_SAMPLES = 2_000
TEXT_SET = "text-v1"
TOKENIZER_VOCAB = 8_000  # fits any BERT vocabulary (30,522)
SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")  # [PAD] = id 0
PAD_ID = 0


def cache_root() -> Path:
    env = os.environ.get("GPUTUI_CACHE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg) / "gputui" if xdg else Path.home() / ".cache" / "gputui"


def _build_once(target: Path, build) -> Path:
    """Run ``build(tmpdir)`` and rename the result to ``target`` unless it exists.
    ``target/manifest.json`` marks a complete data set."""
    if (target / "manifest.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    print(f"gputui.workloads: generating the input data set {target} (once)", file=sys.stderr, flush=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".tmp-", dir=target.parent))
    try:
        build(tmp)
        try:
            os.rename(tmp, target)
        except OSError:
            if not (target / "manifest.json").is_file():
                # A stale, incomplete target (an older crash): replace it.
                shutil.rmtree(target, ignore_errors=True)
                os.rename(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


# --- images ------------------------------------------------------------------------


def _draw_image(index: int, label: int):
    from PIL import Image, ImageDraw, ImageFilter

    rng = np.random.default_rng([17, index])
    h, w = IMAGE_HEIGHT, IMAGE_WIDTH
    # Background: a colour gradient plus noise, so PNG compression has real work.
    base = rng.uniform(40, 215, size=3)
    tilt = rng.uniform(-60, 60, size=3)
    ramp = np.linspace(-0.5, 0.5, w)[None, :, None] * tilt[None, None, :]
    noise = rng.normal(0, 18, size=(h, w, 3))
    pixels = np.clip(base[None, None, :] + ramp + noise, 0, 255).astype(np.uint8)
    img = Image.fromarray(pixels, "RGB")
    draw = ImageDraw.Draw(img)
    cx, cy = rng.uniform(0.35, 0.65) * w, rng.uniform(0.35, 0.65) * h
    r = rng.uniform(0.18, 0.32) * h * 1.4
    color = tuple(int(c) for c in rng.integers(0, 256, size=3))
    if IMAGE_CLASSES[label] == "rock":  # a lumpy closed blob
        angles = np.sort(rng.uniform(0, 2 * math.pi, size=11))
        radii = r * rng.uniform(0.7, 1.0, size=11)
        draw.polygon([(cx + q * math.cos(a), cy + q * math.sin(a)) for a, q in zip(angles, radii)], fill=color)
    elif IMAGE_CLASSES[label] == "paper":  # a flat rotated sheet
        a = rng.uniform(0, math.pi)
        corners = [(-1.0, -0.7), (1.0, -0.7), (1.0, 0.7), (-1.0, 0.7)]
        draw.polygon(
            [(cx + r * (x * math.cos(a) - y * math.sin(a)), cy + r * (x * math.sin(a) + y * math.cos(a))) for x, y in corners],
            fill=color,
        )
    else:  # scissors: two crossing blades and two rings
        a = rng.uniform(0, math.pi)
        for sign in (-1, 1):
            b = a + sign * 0.35
            draw.line([(cx - r * math.cos(b), cy - r * math.sin(b)), (cx + r * math.cos(b), cy + r * math.sin(b))],
                      fill=color, width=int(max(3, r / 7)))  # fmt: skip
            hx, hy = cx - r * math.cos(b), cy - r * math.sin(b)
            q = r / 4
            draw.ellipse([hx - q, hy - q, hx + q, hy + q], outline=color, width=int(max(2, r / 12)))
    return img.filter(ImageFilter.SMOOTH)


def ensure_image_dataset(root: Path | None = None, per_class: int = IMAGES_PER_CLASS) -> list[tuple[str, int]]:
    """The (path, label) list of the generated image set; generated on first use."""
    target = (root or cache_root()) / f"{IMAGE_SET}-{per_class}"

    def build(tmp: Path) -> None:
        files = []
        for label, name in enumerate(IMAGE_CLASSES):
            (tmp / name).mkdir()
            for i in range(per_class):
                rel = f"{name}/{name}{i:04d}.png"
                _draw_image(label * per_class + i, label).save(tmp / rel, format="PNG")
                files.append([rel, label])
        (tmp / "manifest.json").write_text(json.dumps({"classes": IMAGE_CLASSES, "files": files}))

    _build_once(target, build)
    manifest = json.loads((target / "manifest.json").read_text())
    return [(str(target / rel), int(label)) for rel, label in manifest["files"]]


def _random_crop_box(rng: np.random.Generator, w: int, h: int, scale=(0.35, 1.0), ratio=(3 / 4, 4 / 3)):
    """torchvision's RandomResizedCrop box: area share and log-uniform aspect ratio."""
    area = w * h
    for _ in range(10):
        target = area * rng.uniform(*scale)
        aspect = math.exp(rng.uniform(math.log(ratio[0]), math.log(ratio[1])))
        cw, ch = int(round(math.sqrt(target * aspect))), int(round(math.sqrt(target / aspect)))
        if 0 < cw <= w and 0 < ch <= h:
            x, y = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
            return (x, y, x + cw, y + ch)
    side = min(w, h)  # fall back to a centre crop
    return ((w - side) // 2, (h - side) // 2, (w + side) // 2, (h + side) // 2)


def augment(path: str, size: int, level: str, rng: np.random.Generator) -> np.ndarray:
    """Decode one image and augment it: float32 array (3, size, size), normalized."""
    from PIL import Image, ImageEnhance, ImageFilter

    with Image.open(path) as f:
        img = f.convert("RGB")
    if level == "heavy":
        img = img.rotate(float(rng.uniform(-20, 20)), resample=Image.Resampling.BICUBIC)
        img = ImageEnhance.Brightness(img).enhance(float(rng.uniform(0.6, 1.4)))
        img = ImageEnhance.Contrast(img).enhance(float(rng.uniform(0.6, 1.4)))
        img = ImageEnhance.Color(img).enhance(float(rng.uniform(0.6, 1.4)))
        img = img.filter(ImageFilter.GaussianBlur(float(rng.uniform(0.5, 2.0))))
        resample = Image.Resampling.LANCZOS
    elif level == "light":
        resample = Image.Resampling.BILINEAR
    else:
        raise ValueError(f"augment level must be one of {AUGMENT_LEVELS}, not {level!r}")
    box = _random_crop_box(rng, *img.size)
    img = img.resize((size, size), resample=resample, box=box)
    if rng.random() < 0.5:
        img = img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
    arr = np.asarray(img, dtype=np.float32) * (1.0 / 255.0)
    arr = (arr - MEAN) / STD
    return np.ascontiguousarray(arr.transpose(2, 0, 1))


# --- text ----------------------------------------------------------------------------

_ONSETS = ("b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
           "br", "ch", "cl", "dr", "fl", "gr", "pl", "pr", "sh", "sk", "st", "th", "tr")  # fmt: skip
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ea", "io", "ou", "y")
_CODAS = ("", "", "n", "r", "s", "t", "l", "m", "ng", "st", "nd", "ck")


def _vocabulary(rng: np.random.Generator, n: int) -> list[str]:
    words: set[str] = set()
    while len(words) < n:
        syllables = int(rng.integers(1, 5))
        word = "".join(_ONSETS[rng.integers(len(_ONSETS))] + _VOWELS[rng.integers(len(_VOWELS))] + _CODAS[rng.integers(len(_CODAS))] for _ in range(syllables))
        words.add(word)
    return sorted(words)


def generate_texts(n: int = TEXT_SAMPLES, seed: int = 7) -> tuple[list[str], list[int]]:
    """Deterministic labelled sentences: common words (Zipf-like) mixed with the
    class's topic words, 40-220 words each, with punctuation and capitals."""
    rng = np.random.default_rng(seed)
    common = _vocabulary(rng, 3_000)
    rng.shuffle(common)  # frequency rank independent of spelling
    topics = [_vocabulary(np.random.default_rng([seed, c]), 300) for c in range(TEXT_CLASSES)]
    weights = 1.0 / np.arange(1, len(common) + 1)
    weights /= weights.sum()
    texts, labels = [], []
    for i in range(n):
        label = i % TEXT_CLASSES
        length = int(rng.integers(40, 221))
        picks = rng.choice(len(common), size=length, p=weights)
        topical = rng.random(length) < 0.15
        topic_picks = rng.integers(len(topics[label]), size=length)
        marks = rng.random(length)
        words: list[str] = []
        for j in range(length):
            word = topics[label][topic_picks[j]] if topical[j] else common[picks[j]]
            if j == 0 or words[-1].endswith("."):
                word = word.capitalize()
            if marks[j] < 0.08:
                word += "," if marks[j] < 0.05 else "."
            words.append(word)
        texts.append(" ".join(words) + ".")
        labels.append(label)
    return texts, labels


def ensure_text_dataset(root: Path | None = None, n: int = TEXT_SAMPLES) -> tuple[list[str], list[int], str]:
    """(texts, labels, tokenizer.json path); generated and trained on first use.
    Needs the ``tokenizers`` package (a dependency of ``transformers``)."""
    target = (root or cache_root()) / f"{TEXT_SET}-{n}"

    def build(tmp: Path) -> None:
        from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

        texts, labels = generate_texts(n)
        with open(tmp / "corpus.jsonl", "w") as f:
            for text, label in zip(texts, labels):
                f.write(json.dumps({"text": text, "label": label}) + "\n")
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        trainer = trainers.WordPieceTrainer(vocab_size=TOKENIZER_VOCAB, special_tokens=list(SPECIAL_TOKENS), show_progress=False)
        tok.train_from_iterator(texts, trainer=trainer)
        tok.save(str(tmp / "tokenizer.json"))
        (tmp / "manifest.json").write_text(json.dumps({"samples": n, "vocab": tok.get_vocab_size()}))

    _build_once(target, build)
    texts, labels = [], []
    with open(target / "corpus.jsonl") as f:
        for row in f:
            item = json.loads(row)
            texts.append(item["text"])
            labels.append(int(item["label"]))
    return texts, labels, str(target / "tokenizer.json")


def load_tokenizer(path: str, seq_len: int):
    """The trained tokenizer, adding ``[CLS] ... [SEP]`` and padding/truncating to seq_len."""
    from tokenizers import Tokenizer, processors

    tok = Tokenizer.from_file(path)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]", special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    tok.enable_truncation(max_length=seq_len)
    tok.enable_padding(length=seq_len, pad_id=PAD_ID, pad_token="[PAD]")
    return tok


def encode(tokenizer, text: str) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and attention mask (int64 arrays of the tokenizer's padded length)."""
    enc = tokenizer.encode(text)
    return np.asarray(enc.ids, dtype=np.int64), np.asarray(enc.attention_mask, dtype=np.int64)
