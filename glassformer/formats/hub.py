"""Hugging Face Hub ids as models: ``gf.load("Qwen/Qwen3-0.6B")``, through `huggingface_hub`.

    folder = snapshot_folder("Qwen/Qwen3-0.6B")          # the default branch
    folder = snapshot_folder("Qwen/Qwen3-0.6B@v1.0")     # a branch, tag or commit after "@"
    folder = snapshot_folder("Qwen/Qwen3-0.6B", revision="v1.0")

A Hub id is ``owner/name`` (the Hub's repo-id rules: one ``/``; letters, digits, ``-``, ``_``,
``.``; at most 96 characters each side; no ``--`` or ``..``), optionally ``@revision``. The
answer is a directory in huggingface_hub's own cache ($HF_HUB_CACHE, else $HF_HOME/hub, else
~/.cache/huggingface/hub), which `glassformer.loading` then reads like any checkpoint directory.

Only what Glassformer reads is fetched (`ALLOWED_FILES`): the config, the tokenizer, the
safetensors weights, a sentence-transformers model's pooling and the chat template. Pickled
weights (`PICKLED`: ``*.bin``, ``*.pt``, ...) are never fetched: unpickling runs code, and a
repository that has only those is refused, from its file list, before anything is downloaded.

Offline ($HF_HUB_OFFLINE=1, or no network) the cache alone answers; when it lacks the files the
error names the ``hf download`` command that fetches them (`fetch_command`). The environment is
read at each call, not when huggingface_hub was imported, so $HF_ENDPOINT, $HF_HOME,
$HF_HUB_CACHE and $HF_HUB_OFFLINE set later still count.

>>> parse_hub_id("Qwen/Qwen3-0.6B@main")
('Qwen/Qwen3-0.6B', 'main')
>>> hub_id_problem("a/b/c")
"a Hub id has one '/' between owner and name; 'a/b/c' has 2"
"""

from __future__ import annotations

import functools
import os
import re
import shlex
from collections.abc import Iterable
from fnmatch import fnmatch
from pathlib import Path

# What is fetched: read by glassformer.loading (config, weights, sentence-transformers' pooling)
# and by the tokenizer (tokenizer.json, its config and the chat template).
ALLOWED_FILES = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "chat_template.jinja",
    "chat_template.json",
    "modules.json",  # sentence-transformers
    "sentence_bert_config.json",
    "1_Pooling/config.json",
    "model.safetensors",
    "model.safetensors.index.json",
    # transformers' shard names; not "*.safetensors", which would also fetch e.g. Mistral's
    # consolidated.safetensors (the same weights again, for mistral-inference) and ONNX exports
    "model-*-of-*.safetensors",
)
SAFETENSORS_WEIGHTS = ("model.safetensors", "model.safetensors.index.json")
PICKLED = ("*.bin", "*.pt", "*.pth", "*.pkl", "*.pickle", "*.ckpt")  # never fetched, never read
HUB_ID_FORM = "owner/name[@revision]"
_PART = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?")  # the Hub's \b[\w\-.]{1,96}\b
_TRUE = {"1", "ON", "YES", "TRUE"}  # huggingface_hub's spelling of a true variable


def hub_id_problem(text: str) -> str | None:
    """Why ``text`` is not ``owner/name[@revision]``, or None when it is one."""
    repo_id, at, revision = text.partition("@")
    if at and not revision:
        return f"{text!r} has nothing after '@' (the revision: a branch, tag or commit)"
    slashes = repo_id.count("/")
    if slashes != 1:
        return f"a Hub id has one '/' between owner and name; {repo_id!r} has {slashes}"
    for part in repo_id.split("/"):
        if not _PART.fullmatch(part):
            return (
                f"{part!r} in {repo_id!r} is not a Hub name: 1 to 96 letters, digits, '-', '_' or '.', "
                "starting and ending with a letter, digit or '_'"
            )
    if "--" in repo_id or ".." in repo_id or repo_id.endswith(".git"):
        return f"{repo_id!r} is not a Hub id: '--' and '..' are not allowed, nor a '.git' ending"
    return None


def parse_hub_id(text: str, revision: str | None = None) -> tuple[str, str | None]:
    """(repo id, revision) of ``owner/name[@revision]``; ``revision=`` may give the revision
    instead. ValueError naming the rule that ``text`` breaks, or a second, different revision."""
    problem = hub_id_problem(text)
    if problem is not None:
        raise ValueError(problem)
    repo_id, _, in_text = text.partition("@")
    if in_text and revision is not None and in_text != revision:
        raise ValueError(f"two revisions for {repo_id}: {in_text!r} after '@' and revision={revision!r}")
    return repo_id, in_text or revision


def snapshot_folder(hub_id: str, revision: str | None = None) -> Path:
    """The local directory holding ``hub_id``'s config, tokenizer and safetensors weights:
    fetched into huggingface_hub's cache (with its progress bars), or found there offline.

    FileNotFoundError: no such repository or revision, or offline with a cold cache (naming
    the command that fetches the files). ValueError: a repository without safetensors weights
    or config.json, refused before anything is downloaded."""
    from huggingface_hub import HfApi, constants, snapshot_download
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    repo_id, revision = parse_hub_id(hub_id, revision)
    endpoint = os.environ.get("HF_ENDPOINT") or None  # None: huggingface_hub's default
    cache_dir = hub_cache_dir()
    where = _described(repo_id, revision)
    fetch = functools.partial(  # only the files Glassformer reads, never pickles
        snapshot_download,
        repo_id,
        revision=revision,
        cache_dir=cache_dir,
        allow_patterns=list(ALLOWED_FILES),
        ignore_patterns=list(PICKLED),
    )
    switched_off = offline() or constants.HF_HUB_OFFLINE  # now, or when huggingface_hub was imported
    unreachable = "HF_HUB_OFFLINE is set" if switched_off else None
    if unreachable is None:
        try:
            info = HfApi(endpoint=endpoint).model_info(repo_id, revision=revision, files_metadata=False)
        except GatedRepoError:
            raise FileNotFoundError(
                f"{repo_id} is gated: accept its terms on its Hub page, then log in (hf auth login)"
            ) from None
        except RevisionNotFoundError:
            raise FileNotFoundError(f"{repo_id} has no revision {revision!r} on the Hub") from None
        except RepositoryNotFoundError:
            raise FileNotFoundError(
                f"{repo_id} is not a model repository on the Hub "
                "(or it is private: log in with hf auth login)"
            ) from None
        except Exception as error:  # no network, a timeout, the Hub down (the transport's error
            # classes differ between huggingface_hub releases): the cache may still hold the files
            unreachable = f"the Hub could not be reached ({type(error).__name__}: {error})"
        else:
            check_files([sibling.rfilename for sibling in info.siblings or []], repo_id, revision)
            return Path(fetch(endpoint=endpoint))
    try:
        folder = fetch(local_files_only=True)
    except FileNotFoundError:  # huggingface_hub's LocalEntryNotFoundError, IncompleteSnapshotError
        raise FileNotFoundError(
            f"{where} is not in the Hugging Face cache ({cache_dir}) and {unreachable}. With a network, "
            f"fetch its files with:\n  {fetch_command(repo_id, revision)}"
            + ("\n(or unset HF_HUB_OFFLINE and load it again)" if switched_off else "")
        ) from None
    folder = Path(folder)
    check_files(
        [p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()], repo_id, revision
    )
    return folder


def check_files(files: Iterable[str], repo_id: str, revision: str | None = None) -> None:
    """Refuse a repository (or its cached snapshot) Glassformer cannot read, saying why.

    >>> check_files(["config.json", "pytorch_model.bin"], "owner/name")
    Traceback (most recent call last):
    ValueError: owner/name has only pickled weights (pytorch_model.bin), and Glassformer never unpickles ...
    """
    files = list(files)
    where = _described(repo_id, revision)
    if not any(name in SAFETENSORS_WEIGHTS for name in files):
        pickled = [name for name in files if any(fnmatch(name, pattern) for pattern in PICKLED)]
        if pickled:
            raise ValueError(
                f"{where} has only pickled weights ({', '.join(sorted(pickled)[:3])}), and Glassformer "
                "never unpickles a download (that can run code). Convert them once: load the model in "
                "transformers and save it with save_pretrained(folder, safe_serialization=True), then "
                "load that folder; or pick a repository or revision that has model.safetensors"
            )
        gguf = [name for name in files if name.endswith(".gguf")]
        if gguf:
            raise ValueError(
                f"{where} holds .gguf files, not a transformers checkpoint: fetch one with "
                f"{shlex.join(['hf', 'download', repo_id, gguf[0]])} and load that file"
            )
        raise ValueError(f"{where} has no model.safetensors (nor a sharded model.safetensors.index.json)")
    if "config.json" not in files:
        raise ValueError(f"{where} has no config.json, so it is not a transformers checkpoint")


def fetch_command(repo_id: str, revision: str | None = None) -> str:
    """The ``hf download`` command that fetches what `snapshot_folder` reads into the cache.

    >>> fetch_command("owner/name", "v1")[:58]
    'hf download owner/name --revision v1 --include config.json'
    """
    words = ["hf", "download", repo_id, *(["--revision", revision] if revision else [])]
    for pattern in ALLOWED_FILES:
        words += ["--include", pattern]
    return shlex.join(words)


def hub_cache_dir() -> Path:
    """huggingface_hub's cache, read from the environment now: $HF_HUB_CACHE, else
    $HUGGINGFACE_HUB_CACHE (its older name), else $HF_HOME/hub, else
    $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub."""
    explicit = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if explicit:
        return Path(os.path.expandvars(explicit)).expanduser()
    home = os.environ.get("HF_HOME")
    if not home:
        home = str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "huggingface")
    return Path(os.path.expandvars(home)).expanduser() / "hub"


def offline() -> bool:
    """$HF_HUB_OFFLINE (or $TRANSFORMERS_OFFLINE) is set to a true value now."""
    return any(
        (os.environ.get(name) or "").upper() in _TRUE for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    )


def _described(repo_id: str, revision: str | None) -> str:
    return f"{repo_id} (revision {revision})" if revision else repo_id
