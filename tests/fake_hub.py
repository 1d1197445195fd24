"""A Hugging Face Hub on 127.0.0.1 for the tests of Hub ids: the routes huggingface_hub calls.

    with FakeHub() as hub:                      # two free ports: the Hub and its file store
        hub.add("owner/tiny", folder)           # revision "main": every file in folder
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)

Routes, as huggingface_hub 2.x calls them (``hf_api.py``, ``file_download.py``):

* ``GET /api/models/{repo}[/revision/{rev}]``: model_info, the file list (``siblings``) and ``sha``;
* ``GET /api/models/{repo}/tree/{rev}?recursive=...``: snapshot_download's listing, one page;
* ``HEAD|GET /{repo}/resolve/{rev}/{path}``: a small file answered here (``ETag``: its git blob
  id, ``X-Repo-Commit``, ``Content-Length``); a weights file (LFS on the Hub) redirected with
  302 to the file store, another origin as the Hub's CDN, so huggingface_hub reads ``X-Linked-Etag``
  (its sha256) and ``X-Linked-Size`` from the redirect itself;
* ``GET /lfs/{sha256}`` on the file store: the bytes.

A missing repository, revision or file is 404 with the ``X-Error-Code`` the Hub sends
(``RepoNotFound``, ``RevisionNotFound``, ``EntryNotFound``). Every request is recorded
(``requests``: method and path) so a test can say what was, and was not, fetched.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")  # stored in LFS on the Hub


class FakeHub:
    def __init__(self) -> None:
        self.repos: dict[str, dict[str, tuple[str, dict[str, bytes]]]] = {}  # repo -> rev -> (sha, files)
        self.requests: list[tuple[str, str]] = []
        self._servers = [ThreadingHTTPServer(("127.0.0.1", 0), _handler(self)) for _ in range(2)]
        self.endpoint, self.store = (f"http://127.0.0.1:{s.server_address[1]}" for s in self._servers)

    def add(self, repo_id: str, folder: Path | dict[str, bytes], revision: str = "main") -> str:
        """Serve ``folder``'s files (or a {path: bytes} dict) as ``revision``; its commit sha."""
        if isinstance(folder, Path):
            folder = {
                p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
            }
        commit = hashlib.sha1(repr((revision, sorted(folder.items()))).encode()).hexdigest()
        self.repos.setdefault(repo_id, {})[revision] = (commit, dict(folder))
        return commit

    def paths(self, method: str = "GET") -> list[str]:
        return [path for m, path in self.requests if m == method]

    def __enter__(self) -> FakeHub:
        for server in self._servers:
            threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()

    def snapshot(self, repo_id: str, revision: str) -> tuple[str, dict[str, bytes]] | None:
        revisions = self.repos[repo_id]
        if revision in revisions:
            return revisions[revision]
        return next((snap for snap in revisions.values() if snap[0] == revision), None)  # a commit sha


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # quiet
            pass

        def do_HEAD(self) -> None:
            self._answer(body=False)

        def do_GET(self) -> None:
            self._answer(body=True)

        def _answer(self, body: bool) -> None:
            path = urlsplit(self.path).path
            hub.requests.append((self.command, unquote(path)))
            if found := re.fullmatch(r"/lfs/([0-9a-f]{64})", path):
                blobs = {
                    hashlib.sha256(data).hexdigest(): data
                    for revisions in hub.repos.values()
                    for _, files in revisions.values()
                    for data in files.values()
                }
                return self._send(200, blobs.get(found[1], b""), {}, body)
            if found := re.fullmatch(r"/api/models/([^/]+/[^/]+)(?:/revision/([^/]+))?", path):
                return self._info(found[1], unquote(found[2] or "main"), body)
            if found := re.fullmatch(r"/api/models/([^/]+/[^/]+)/tree/([^/]+)", path):
                return self._tree(found[1], unquote(found[2]), body)
            if found := re.fullmatch(r"/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", path):
                return self._file(found[1], unquote(found[2]), unquote(found[3]), body)
            self._send(404, b"no such route", {}, body)

        def _find(self, repo_id: str, revision: str, body: bool) -> tuple[str, dict[str, bytes]] | None:
            if repo_id not in hub.repos:
                self._send(404, b"", {"X-Error-Code": "RepoNotFound", "X-Error-Message": "not found"}, body)
                return None
            snapshot = hub.snapshot(repo_id, revision)
            if snapshot is None:
                self._send(404, b"", {"X-Error-Code": "RevisionNotFound", "X-Error-Message": "no rev"}, body)
            return snapshot

        def _info(self, repo_id: str, revision: str, body: bool) -> None:
            if found := self._find(repo_id, revision, body):
                sha, files = found
                info = {"id": repo_id, "sha": sha, "siblings": [{"rfilename": name} for name in files]}
                self._send(200, json.dumps(info).encode(), {"Content-Type": "application/json"}, body)

        def _tree(self, repo_id: str, revision: str, body: bool) -> None:
            if found := self._find(repo_id, revision, body):
                entries = []
                for name, data in found[1].items():
                    entry = {"type": "file", "path": name, "size": len(data), "oid": git_blob_id(data)}
                    if name.endswith(LFS_SUFFIXES):
                        entry["lfs"] = {
                            "oid": hashlib.sha256(data).hexdigest(),
                            "size": len(data),
                            "pointerSize": 134,
                        }
                    entries.append(entry)
                self._send(200, json.dumps(entries).encode(), {"Content-Type": "application/json"}, body)

        def _file(self, repo_id: str, revision: str, name: str, body: bool) -> None:
            found = self._find(repo_id, revision, body)
            if found is None:
                return
            sha, files = found
            if name not in files:
                self._send(404, b"", {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": sha}, body)
                return
            data = files[name]
            headers = {"X-Repo-Commit": sha, "ETag": f'"{git_blob_id(data)}"'}
            if name.endswith(LFS_SUFFIXES):
                digest = hashlib.sha256(data).hexdigest()
                headers |= {"X-Linked-Etag": f'"{digest}"', "X-Linked-Size": str(len(data))}
                headers["Location"] = f"{hub.store}/lfs/{digest}"
                self._send(302, b"", headers, body)
                return
            self._send(200, data, headers, body)

        def _send(self, status: int, data: bytes, headers: dict[str, str], body: bool) -> None:
            self.send_response(status)
            for key, value in {**headers, "Content-Length": str(len(data))}.items():
                self.send_header(key, value)
            self.end_headers()
            if body:
                self.wfile.write(data)

    return Handler
