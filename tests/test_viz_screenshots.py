"""`keep_screenshot` copies a screenshot out of tmp_path only when GLASSFORMER_SCREENSHOTS is set."""

from __future__ import annotations

from tests.screenshots import ENV, keep_screenshot


def shot(tmp_path):
    path = tmp_path / "made" / "view.png"
    path.parent.mkdir()
    path.write_bytes(b"\x89PNG not really")
    return path


def test_without_the_variable_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    path = shot(tmp_path)
    assert keep_screenshot(path) is None
    monkeypatch.setenv(ENV, "")
    assert keep_screenshot(path) is None
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["made", "view.png"]


def test_with_the_variable_the_folder_is_made_and_the_shot_copied(tmp_path, monkeypatch):
    folder = tmp_path / "review" / "shots"  # does not exist yet
    monkeypatch.setenv(ENV, str(folder))
    path = shot(tmp_path)
    assert keep_screenshot(path) == folder / "view.png"
    assert keep_screenshot(path, "renamed.png") == folder / "renamed.png"
    assert sorted(p.name for p in folder.iterdir()) == ["renamed.png", "view.png"]
    assert (folder / "view.png").read_bytes() == path.read_bytes()
