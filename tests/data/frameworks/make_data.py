"""Small, local stand-ins for the data sets and model files the frameworks' example
scripts download, laid out where those scripts (and the libraries they call) look for
them, so that the scripts run unchanged, offline, in seconds on a CPU.

Each function writes into a folder it is given (a test's tmp_path); nothing is read from
the network.  Random content: the scripts only need the shapes and file formats right.

    python tests/data/frameworks/make_data.py nanogpt|timm|wikitext|mnist|hf|hf_trainer WORKDIR

writes the one named into WORKDIR, as the tests in tests/frameworks do.
"""

from __future__ import annotations

import json
import pickle
import random
import string
import sys
from pathlib import Path

import numpy as np

# --- nanoGPT: data/<dataset>/train.bin, val.bin (uint16 token ids) and meta.pkl ------------
# As data/shakespeare_char/prepare.py writes them: characters as tokens, vocab_size in meta.pkl.

NANOGPT_DATASET = "synthetic_char"


def make_nanogpt(workdir: Path, train_tokens: int = 50_000, val_tokens: int = 5_000) -> Path:
    folder = workdir / "data" / NANOGPT_DATASET
    folder.mkdir(parents=True, exist_ok=True)
    chars = sorted(set(string.ascii_letters + " \n.,;:!?'-"))
    rng = np.random.default_rng(0)
    rng.integers(0, len(chars), train_tokens, dtype=np.uint16).tofile(folder / "train.bin")
    rng.integers(0, len(chars), val_tokens, dtype=np.uint16).tofile(folder / "val.bin")
    meta = {"vocab_size": len(chars), "itos": dict(enumerate(chars)), "stoi": {c: i for i, c in enumerate(chars)}}
    with open(folder / "meta.pkl", "wb") as f:
        pickle.dump(meta, f)
    return folder


# --- timm: an ImageFolder with train/ and validation/ splits (timm's default split names) ---


def make_image_folder(workdir: Path, classes: int = 4, train_per_class: int = 80, val_per_class: int = 64, size: int = 32) -> Path:
    from PIL import Image

    root = workdir / "imagefolder"
    rng = np.random.default_rng(0)
    for split, count in (("train", train_per_class), ("validation", val_per_class)):
        for c in range(classes):
            folder = root / split / f"class{c}"
            folder.mkdir(parents=True, exist_ok=True)
            for i in range(count):
                Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(folder / f"{i}.png")
    return root


# --- Lightning's WikiText2 demo: ./data/wikitext-2.txt, whitespace-separated words -----------
# lightning.pytorch.demos.transformer.WikiText2 reads data_dir / "wikitext-2.txt" (data_dir
# defaults to ./data) and downloads only when the file is missing; it cuts the tokens
# (words plus an <eos> per line) into blocks of 35 and the example splits them
# [n - 4000, 2000, 2000], so n must be over 4000 blocks.


def make_wikitext(workdir: Path, blocks: int = 4200, words: int = 200, block_size: int = 35) -> Path:
    rng = random.Random(0)
    vocabulary = [f"w{i}" for i in range(words)]
    target = (blocks + 2) * block_size
    lines, count = [], 0
    while count < target:
        k = rng.randint(5, 20)
        lines.append(" " + " ".join(rng.choice(vocabulary) for _ in range(k)) + " ")
        count += k + 1  # the words and the line's <eos>
    path = workdir / "data" / "wikitext-2.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf8")
    return path


# --- MNIST for Lightning's autoencoder: torchvision's raw IDX files --------------------------
# lightning.pytorch.demos.mnist_datamodule.MNIST calls torchvision.datasets.MNIST("./data",
# download=True) first, then MNIST(root) with the example's root; torchvision downloads only
# when <root>/MNIST/raw/{train,t10k}-{images-idx3,labels-idx1}-ubyte are missing.  The example
# splits the training set [55000, 5000], so it must have 60000 images.


def make_mnist(root: Path, train: int = 60_000, test: int = 10_000) -> Path:
    raw = root / "MNIST" / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for prefix, n in (("train", train), ("t10k", test)):
        with open(raw / f"{prefix}-images-idx3-ubyte", "wb") as f:
            f.write(np.array([2051, n, 28, 28], dtype=">i4").tobytes())
            f.write(rng.integers(0, 256, (n, 28, 28), dtype=np.uint8).tobytes())
        with open(raw / f"{prefix}-labels-idx1-ubyte", "wb") as f:
            f.write(np.array([2049, n], dtype=">i4").tobytes())
            f.write(rng.integers(0, 10, n, dtype=np.uint8).tobytes())
    return raw


# --- Hugging Face: a tiny "bert-base-cased" in the hub cache, GLUE MRPC in the datasets cache --
# With HF_HUB_OFFLINE=1, from_pretrained("bert-base-cased") reads
# $HF_HOME/hub/models--bert-base-cased/snapshots/<refs/main>/, and
# load_dataset("nyu-mll/glue", "mrpc") falls back to the datasets cache,
# $HF_HOME/datasets/nyu-mll___glue/mrpc/0.0.0/<hash>/ (datasets' "cache" builder).  The
# model is a 2-layer BERT of width 32 over a 65-word vocabulary; the sentences are random
# words of it.  The same rows are also written as CSV files, for run_glue.py's
# --train_file/--validation_file, and the model as a folder, for --model_name_or_path.

HF_REVISION = "0" * 40
HF_WORDS = [f"w{i}" for i in range(60)]


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choices(HF_WORDS, k=rng.randint(10, 30)))


# A BERT's shape: the tiny one every CPU run uses, and BERT-large's (random weights), for a
# GPU run whose steps must take long enough for a steady rate over the tutorial's 375 steps,
# and for the GPU, not the loop, to be the limit.
BERT_TINY = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 128}
BERT_LARGE = {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096, "max_position_embeddings": 512}


def tiny_bert(hf_home: Path, repo_id: str, shape: dict | None = None) -> Path:
    """A BERT over a 65-word vocabulary, in the hub cache as ``repo_id``: 2 layers of width
    32 unless ``shape`` says otherwise (its tokenizer pads to its longest position)."""
    from transformers import BertConfig, BertModel

    shape = shape or BERT_TINY

    repo = hf_home / "hub" / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / HF_REVISION
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(HF_REVISION)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *HF_WORDS]
    (snapshot / "vocab.txt").write_text("\n".join(vocab) + "\n")
    (snapshot / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False, "model_max_length": shape["max_position_embeddings"]}))
    config = BertConfig(vocab_size=len(vocab), **shape)
    BertModel(config).save_pretrained(snapshot)  # as the real one: no classification head, the script adds its own
    return snapshot


def make_hf(hf_home: Path, workdir: Path, train: int = 640, validation: int = 320, shape: dict | None = None) -> dict[str, Path]:
    """accelerate's nlp_example.py: "bert-base-cased" (``tiny_bert``'s ``shape``) and "nyu-mll/glue" "mrpc"."""
    snapshot = tiny_bert(hf_home, "bert-base-cased", shape)
    rng = random.Random(0)
    rows = {
        split: [{"sentence1": _sentence(rng), "sentence2": _sentence(rng), "label": rng.randint(0, 1), "idx": i} for i in range(n)]
        for split, n in (("train", train), ("validation", validation), ("test", validation))
    }
    features = {"sentence1": "string", "sentence2": "string", "label": ["not_equivalent", "equivalent"], "idx": "int32"}
    _dataset_cache(hf_home / "datasets", "nyu-mll/glue", "mrpc", "glue", features, rows)
    csv_files = {}
    for split in ("train", "validation"):
        path = workdir / f"mrpc_{split}.csv"
        with open(path, "w", encoding="utf8") as f:
            f.write("sentence1,sentence2,label\n")
            f.writelines(f"{r['sentence1']},{r['sentence2']},{r['label']}\n" for r in rows[split])
        csv_files[split] = path
    return {"model": snapshot, **csv_files}


def make_hf_trainer(hf_home: Path, train: int = 1000, test: int = 1000, shape: dict | None = None) -> Path:
    """The Trainer tutorial: "google-bert/bert-base-cased" (``tiny_bert``'s ``shape``) and
    "yelp_review_full" (5 labels, a text column; the tutorial takes 1000 rows of each split)."""
    snapshot = tiny_bert(hf_home, "google-bert/bert-base-cased", shape)
    rng = random.Random(1)
    rows = {split: [{"label": rng.randint(0, 4), "text": _sentence(rng)} for _ in range(n)] for split, n in (("train", train), ("test", test))}
    features = {"label": ["1 star", "2 star", "3 stars", "4 stars", "5 stars"], "text": "string"}
    _dataset_cache(hf_home / "datasets", "yelp_review_full", "yelp_review_full", "yelp_review_full", features, rows)
    return snapshot


def _dataset_cache(cache: Path, repo_id: str, config_name: str, dataset_name: str, columns: dict, rows: dict[str, list[dict]]) -> None:
    """``rows`` by split as datasets' cache of ``repo_id`` (the "cache" builder's layout);
    a column's type is a Value dtype, or a list of class names (ClassLabel)."""
    from datasets import ClassLabel, DatasetInfo, Features, SplitDict, SplitInfo, Value
    from datasets.arrow_writer import ArrowWriter
    from datasets.naming import camelcase_to_snakecase

    features = Features({name: ClassLabel(names=kind) if isinstance(kind, list) else Value(kind) for name, kind in columns.items()})
    namespace_and_name = repo_id.split("/")
    namespace_and_name[-1] = camelcase_to_snakecase(namespace_and_name[-1])
    folder = cache / "___".join(namespace_and_name) / config_name / "0.0.0" / HF_REVISION
    folder.mkdir(parents=True, exist_ok=True)
    splits = SplitDict(dataset_name=dataset_name)
    for split, records in rows.items():
        with ArrowWriter(features=features, path=str(folder / f"{dataset_name}-{split}.arrow")) as writer:
            for record in records:
                writer.write(record)
            count, size = writer.finalize()
        splits.add(SplitInfo(name=split, num_bytes=size, num_examples=count, dataset_name=dataset_name))
    info = DatasetInfo(features=features, splits=splits, dataset_name=dataset_name, config_name=config_name, builder_name=dataset_name)
    info.write_to_directory(str(folder))


if __name__ == "__main__":
    what, where = sys.argv[1], Path(sys.argv[2])
    made = {
        "nanogpt": lambda: make_nanogpt(where),
        "timm": lambda: make_image_folder(where),
        "wikitext": lambda: make_wikitext(where),
        "mnist": lambda: make_mnist(where / "data"),
        "hf": lambda: make_hf(where / "hf", where),
        "hf_trainer": lambda: make_hf_trainer(where / "hf"),
    }[what]()
    print(made)
