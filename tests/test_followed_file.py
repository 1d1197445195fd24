"""A run file the lab streams, read defensively (`glassformer.workshop.lab.followed_file`): no
line and no state of the file raises; each bad line is a problem with its line number, and
the lines after it still arrive."""

from __future__ import annotations

from glassformer.workshop.lab.followed_file import MAX_LINE_BYTES, FollowedFile


def test_bad_lines_are_problems_and_the_good_ones_around_them_arrive(tmp_path):
    path = tmp_path / "progress.jsonl"
    path.write_bytes(b'{"step": 1}\n\xc3\x28\n{"step": \n' + b"[" * 65 + b"]" * 65 + b'\n[[["[[[["]]]\n')
    followed = FollowedFile(path)
    reading = followed.read()
    assert reading.records == [{"step": 1}, [[["[[[["]]]]
    reasons = {problem["line"]: problem["reason"] for problem in reading.problems}
    assert {problem["file"] for problem in reading.problems} == {"progress.jsonl"}
    assert reasons[2].startswith("is not UTF-8 text (byte 0xc3")
    assert reasons[3].startswith("is not JSON") and "brackets deep" in reasons[4]
    with open(path, "ab") as handle:
        handle.write(b'{"step": 5')  # still being written: waits for its end
        handle.flush()
        assert followed.read().records == []
        handle.write(b"}\n")
    assert followed.read().records == [{"step": 5}]


def test_an_over_long_line_is_skipped_even_across_reads(tmp_path):
    path = tmp_path / "film.jsonl"
    path.write_bytes(b'{"step": 1}\n' + b"x" * (5 * MAX_LINE_BYTES))  # longer than one read, no end yet
    followed = FollowedFile(path)
    reading = followed.read()
    assert reading.records == [{"step": 1}] and [p["line"] for p in reading.problems] == [2]
    assert "longer than 1,000,000 bytes" in reading.problems[0]["reason"]
    with open(path, "ab") as handle:
        handle.write(b'xxx\n{"step": 2}\n')
    readings = [followed.read() for _ in range(3)]
    assert [r for reading in readings for r in reading.records] == [{"step": 2}]
    assert not any(reading.problems for reading in readings)  # told once
    assert followed.line == 3


def test_a_replaced_vanished_or_unreadable_file_is_told_not_raised(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 1}\n{"step": 2}\n')
    followed = FollowedFile(path)
    assert len(followed.read().records) == 2
    replacement = tmp_path / "new.jsonl"
    replacement.write_text('{"step": 1}\n{"step": 2}\n{"step": 3}\n')
    replacement.replace(path)  # a new run's file, longer than the old one
    reading = followed.read()
    assert reading.reset and [r["step"] for r in reading.records] == [1, 2, 3]
    path.unlink()
    assert followed.read().reset and followed.read().records == []
    path.mkdir()  # something that cannot be read as a file
    problems = followed.read().problems
    assert problems[0]["file"] == "metrics.jsonl" and problems[0]["reason"].startswith("cannot be read")
    assert followed.read().problems == []  # told once
