"""Replacing a directory (`glassformer.atomic`): all or nothing, and never anyone else's files.

A writer names the files it owns; a directory is replaced only when it is absent, empty or
holds nothing else, and a refusal leaves every byte where it was.
"""

from __future__ import annotations

import pytest

from glassformer.atomic import check_replaceable, write_directory_atomic

OWNED = ("config.json", "model.safetensors", "model-*-of-*.safetensors")


def _snapshot(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _write(folder, files: dict[str, str]):
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)


def test_absent_empty_and_owned_only_directories_may_be_replaced(tmp_path):
    check_replaceable(tmp_path / "absent", OWNED)
    (tmp_path / "empty").mkdir()
    check_replaceable(tmp_path / "empty", OWNED)
    _write(tmp_path / "ckpt", {"config.json": "{}", "model-00001-of-00002.safetensors": "x"})
    check_replaceable(tmp_path / "ckpt", OWNED)


def test_other_files_and_folders_are_named(tmp_path):
    _write(tmp_path / "home", {"config.json": "{}", "notes.txt": "mine", "Model.safetensors": "case"})
    (tmp_path / "home" / "model.safetensors").mkdir()  # an owned name, but a folder: not ours
    with pytest.raises(ValueError, match=r"holds Model.safetensors, model.safetensors/, notes.txt, which"):
        check_replaceable(tmp_path / "home", OWNED)
    with pytest.raises(ValueError, match=r"home is not empty \(it holds Model.safetensors, config.json, "):
        check_replaceable(tmp_path / "home", ())  # owning nothing: only an empty one will do
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError, match="is not a directory"):
        check_replaceable(tmp_path / "file", OWNED)


def test_a_checkpoint_directory_is_replaced_whole(tmp_path):
    target = tmp_path / "out"
    _write(target, {"config.json": "old", "model-00001-of-00002.safetensors": "old shard"})
    with write_directory_atomic(target, OWNED) as staging:
        assert staging.parent == tmp_path and staging.name.startswith(".out.")
        _write(staging, {"config.json": "new", "model.safetensors": "weights"})
        assert (target / "config.json").read_text() == "old"  # nothing changes before the end
    assert _snapshot(target) == {"config.json": b"new", "model.safetensors": b"weights"}
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no staging or old directory left


def test_a_refusal_loses_nothing(tmp_path):
    target = tmp_path / "home"
    _write(target, {"config.json": "{}", "thesis.tex": "years of work"})
    (target / "photos").mkdir()
    (target / "photos" / "cat.jpg").write_bytes(b"\xff\xd8")
    before = _snapshot(target)
    with pytest.raises(ValueError, match=r"holds photos/, thesis.tex, which this writer does not own"):
        with write_directory_atomic(target, OWNED) as staging:
            _write(staging, {"config.json": "new"})
    assert _snapshot(target) == before
    assert [p.name for p in tmp_path.iterdir()] == ["home"]


def test_a_file_that_appears_while_writing_stops_the_replacement(tmp_path):
    target = tmp_path / "out"
    _write(target, {"config.json": "old"})
    with pytest.raises(ValueError, match="holds late.txt"):
        with write_directory_atomic(target, OWNED) as staging:
            _write(staging, {"config.json": "new"})
            (target / "late.txt").write_text("someone else's")  # checked again before the rename
    assert _snapshot(target) == {"config.json": b"old", "late.txt": b"someone else's"}
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_an_error_while_writing_leaves_the_old_directory(tmp_path):
    target = tmp_path / "out"
    _write(target, {"config.json": "old"})
    with pytest.raises(RuntimeError, match="disk full"):
        with write_directory_atomic(target, OWNED) as staging:
            _write(staging, {"config.json": "half"})
            raise RuntimeError("disk full")
    assert _snapshot(target) == {"config.json": b"old"}
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_a_link_is_replaced_and_the_folder_it_points_to_kept(tmp_path):
    real = tmp_path / "real"
    _write(real, {"config.json": "old"})
    (tmp_path / "link").symlink_to(real)
    with write_directory_atomic(tmp_path / "link", OWNED) as staging:
        _write(staging, {"config.json": "new"})
    assert not (tmp_path / "link").is_symlink()
    assert _snapshot(tmp_path / "link") == {"config.json": b"new"}
    assert _snapshot(real) == {"config.json": b"old"}
