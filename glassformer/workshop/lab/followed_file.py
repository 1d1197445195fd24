"""A run's JSON-lines file followed as it grows, read defensively: no line can stop the stream.

The lab streams ``progress.jsonl``, ``metrics.jsonl`` and ``film.jsonl`` to the page while
a trainer appends to them (`lab_routes`). Anything may turn up in them: a line a crash cut
short, bytes that are not UTF-8, JSON nested 100,000 deep (json's parser recurses once per
bracket, so that line raises RecursionError), a line of a gigabyte. The file may be
replaced by a new run's, vanish, or become unreadable, and a run from elsewhere may hold a
FIFO or a link out of the run in its place: it is opened as every run file is
(`glassformer.formats.bounded_read.open_confined`: never blocking, only a regular file inside
the run). Each bad line becomes a problem, ``{"file": "progress.jsonl", "line": 7,
"reason": "..."}``, and reading goes on with the next line; a file that cannot be read is a
problem too (told once, not every poll).

    followed = FollowedFile(run / "progress.jsonl")
    reading = followed.read()        # Reading(records=[...], problems=[...], reset=False)

A record is a JSON value that parsed, at most `MAX_DEPTH` brackets deep, from a line of at
most `MAX_LINE_BYTES`; NaN and Infinity (which Python's json writes and a browser's
JSON.parse refuses) are read as null.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from glassformer.formats.bounded_read import RunFileRefused, open_confined

MAX_LINE_BYTES = 1_000_000  # a film frame is ~100 KB; a progress line ~150 bytes
MAX_DEPTH = 64  # the run files nest 5 deep at most
READ_BYTES = 4 * MAX_LINE_BYTES  # read per call: a long file arrives over a few polls
STRING = re.compile(r'"(?:[^"\\]|\\.)*"')  # a JSON string, escapes included
BRACKET = re.compile(r"[\[\]{}]")


class BadLine(ValueError):
    """A line that is not a record, and why."""


@dataclass
class Reading:
    """What one `FollowedFile.read` found: ``reset`` means the file started again (a new run
    in its place, or it is gone): what was read of it before no longer holds."""

    records: list[Any] = field(default_factory=list)
    problems: list[dict[str, Any]] = field(default_factory=list)
    reset: bool = False


class FollowedFile:
    """One file, read a whole line at a time from where the last read stopped."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.offset = 0  # bytes read
        self.line = 0  # whole lines read
        self._identity: tuple[int, int] | None = None  # (device, inode) of the file being read
        self._skipping = False  # inside a line longer than MAX_LINE_BYTES, told already
        self._unreadable: str | None = None  # why it could not be read last time, told already

    def read(self) -> Reading:
        """The records and problems of the lines completed since the last call."""
        reading = Reading()
        try:
            with os.fdopen(open_confined(self.path), "rb") as handle:
                status = os.fstat(handle.fileno())
                identity = (status.st_dev, status.st_ino)
                if self._identity not in (None, identity) or status.st_size < self.offset:
                    self._start_again(reading)  # replaced, or cut back: a new run's file
                self._identity = identity
                handle.seek(self.offset)
                data = handle.read(READ_BYTES)
        except FileNotFoundError:
            if self._identity is not None:  # it was here: removed (a new run is on its way)
                self._start_again(reading)
                self._identity = None
            return reading
        except (OSError, RunFileRefused) as error:
            reason = f"cannot be read: {getattr(error, 'strerror', None) or error}"
            if reason != self._unreadable:
                reading.problems.append({"file": self.path.name, "line": None, "reason": reason})
            self._unreadable = reason
            return reading
        self._unreadable = None
        self._take(data, reading)
        return reading

    def _take(self, data: bytes, reading: Reading) -> None:
        end = data.rfind(b"\n") + 1
        for raw in data[:end].split(b"\n")[:-1]:
            self.line += 1
            if self._skipping:  # the end of a line too long to read
                self._skipping = False
                continue
            if not raw.strip():
                continue
            try:
                reading.records.append(parse_line(raw))
            except BadLine as error:
                reading.problems.append({"file": self.path.name, "line": self.line, "reason": str(error)})
        if len(data) - end > MAX_LINE_BYTES or (self._skipping and end == 0):
            if not self._skipping:
                reason = f"is longer than {MAX_LINE_BYTES:,} bytes, more than a run's line can be; skipped"
                reading.problems.append({"file": self.path.name, "line": self.line + 1, "reason": reason})
            self._skipping = True
            end = len(data)  # read on past it
        self.offset += end

    def _start_again(self, reading: Reading) -> None:
        self.offset = self.line = 0
        self._skipping = False
        reading.reset = True


def parse_line(raw: bytes) -> Any:
    """The JSON value of one line; `BadLine` saying why when it is none."""
    if len(raw) > MAX_LINE_BYTES:
        raise BadLine(f"is {len(raw):,} bytes long, more than the {MAX_LINE_BYTES:,} a run's line can be")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BadLine(
            f"is not UTF-8 text (byte 0x{raw[error.start]:02x} at position {error.start})"
        ) from None
    if too_deep(text):
        raise BadLine(f"nests more than {MAX_DEPTH} brackets deep, deeper than any run file; skipped")
    try:
        return json.loads(text, parse_constant=lambda name: None)
    except json.JSONDecodeError as error:
        raise BadLine(
            f"is not JSON ({error.msg} at column {error.colno}); a crash may have cut it short"
        ) from None


def too_deep(text: str, most: int = MAX_DEPTH) -> bool:
    """Whether the brackets of a JSON text nest deeper than ``most``, strings left out.

    >>> too_deep('{"a": [[1], "[[[["]}', most=3), too_deep("[" * 100_000)
    (False, True)
    """
    if text.count("[") + text.count("{") <= most:  # it cannot nest deeper than it has brackets
        return False
    depth = 0
    for match in BRACKET.finditer(STRING.sub("", text)):
        depth += 1 if match.group() in "[{" else -1
        if depth > most:
            return True
    return False
