"""A run folder from elsewhere cannot run code when it is resumed (issue 27's first attack).

The attack: ``trainer_state.pt`` names a distributed checkpoint whose ``.metadata`` is a pickle
of ``os.system``; torch's DCP reader unpickles it on "Continue" / ``train --resume``. Here the
checkpoint is read through our JSON manifest only (`glassformer.train.dcp_manifest`), a path
outside ``distributed/step-NNNNNNNN`` is refused, and nothing is ever unpickled: the marker the
pickle would write never appears."""

from __future__ import annotations

import json
import os
import pickle

import pytest
import torch
import torch.distributed.checkpoint as dcp

from glassformer.train import checkpoint, dcp_manifest
from tests.test_trainer import make_trainer, tiny_run

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")  # one process


class _RunsCode:
    """A pickle that runs a shell command when it is loaded."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        return (os.system, (self.command,))


def _trained(tmp_path):
    run = tiny_run(tmp_path, steps=4, dtype="float32")
    make_trainer(run, tmp_path, "run").fit()
    return run, tmp_path / "run"


def _name_checkpoint(run_dir, where: str) -> None:
    """Rewrite ``trainer_state.pt`` so that it names ``where`` as its distributed checkpoint."""
    state = checkpoint.load_trainer_state(run_dir)
    state["distributed"] = {"checkpoint": where, "world_size": 2, "optimizer": False}
    torch.save(state, run_dir / checkpoint.TRAINER_STATE)


def test_a_pickled_dcp_metadata_is_never_loaded(tmp_path):
    run, run_dir = _trained(tmp_path)
    marker = tmp_path / "pwned"
    folder = run_dir / "distributed" / "step-00000004"
    folder.mkdir(parents=True)
    (folder / ".metadata").write_bytes(pickle.dumps(_RunsCode(f"touch {marker}")))
    _name_checkpoint(run_dir, "distributed/step-00000004")
    with pytest.raises(ValueError, match="no manifest.json"):
        make_trainer(run, tmp_path, "run").fit(resume=True)
    assert not marker.exists()


OUTSIDE = ["ABSOLUTE", "../other/distributed/step-00000004", "distributed/../a"]  # ABSOLUTE: under tmp_path


@pytest.mark.parametrize("where", OUTSIDE)
def test_a_checkpoint_outside_the_run_is_refused(tmp_path, where):
    run, run_dir = _trained(tmp_path)
    _name_checkpoint(run_dir, str(tmp_path / "elsewhere") if where == "ABSOLUTE" else where)
    with pytest.raises(ValueError, match="Glassformer writes only distributed/step-NNNNNNNN"):
        make_trainer(run, tmp_path, "run").fit(resume=True)


def test_a_linked_checkpoint_folder_is_refused(tmp_path):
    run, run_dir = _trained(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    (run_dir / "distributed").mkdir()
    (run_dir / "distributed" / "step-00000004").symlink_to(tmp_path / "elsewhere")
    _name_checkpoint(run_dir, "distributed/step-00000004")
    with pytest.raises(ValueError, match="outside"):
        make_trainer(run, tmp_path, "run").fit(resume=True)


def _saved(tmp_path):
    """A one-process DCP checkpoint of a tensor and a plain value, with its manifest."""
    folder = tmp_path / "dcp"
    state = {"model": {"w": torch.arange(6.0).reshape(2, 3)}, "extra": {"lr": 0.5, "betas": (0.9, 0.95)}}
    dcp_manifest.write(folder, dcp.save(state, checkpoint_id=folder))
    return folder, state


def test_the_manifest_reads_back_what_dcp_saved(tmp_path):
    folder, state = _saved(tmp_path)
    (folder / ".metadata").write_bytes(pickle.dumps(_RunsCode(f"touch {tmp_path / 'pwned'}")))  # never read
    loaded = {"model": {"w": torch.zeros(2, 3)}, "extra": {"lr": 0.0, "betas": (0.0, 0.0)}}
    dcp_manifest.load(loaded, folder)
    torch.testing.assert_close(loaded["model"]["w"], state["model"]["w"], rtol=0, atol=0)
    assert loaded["extra"] == {"lr": 0.5, "betas": (0.9, 0.95)}
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda m: m["storage"][0].update(file="../../etc/passwd"), "plain name"),
        (lambda m: m["storage"][0].update(file="/etc/passwd"), "plain name"),
        (lambda m: next(iter(m["tensors"].values())).update(dtype="__class__"), "not a torch dtype"),
        (lambda m: m.update(format="pickle"), "not a glassformer-dcp manifest"),
        (lambda m: m["storage"][0].update(length=-1), "whole number"),
    ],
)
def test_a_tampered_manifest_is_refused(tmp_path, change, reason):
    folder, _ = _saved(tmp_path)
    manifest = json.loads((folder / dcp_manifest.MANIFEST).read_text())
    change(manifest)
    (folder / dcp_manifest.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=reason):
        dcp_manifest.load({"model": {"w": torch.zeros(2, 3)}}, folder)


def test_a_value_that_is_not_plain_is_refused(tmp_path):
    """The non-tensor values are read weights-only: a pickled callable is refused, not called."""
    folder, _ = _saved(tmp_path)
    manifest = json.loads((folder / dcp_manifest.MANIFEST).read_text())
    entry = next(e for e in manifest["storage"] if e["fqn"] == "extra.lr")
    shard = folder / entry["file"]
    payload = _torch_saved(_RunsCode(f"touch {tmp_path / 'pwned'}"))
    with shard.open("ab") as file:  # the value now points at a pickle of os.system
        entry["at"] = file.tell()
        file.write(payload)
    entry["length"] = len(payload)
    (folder / dcp_manifest.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="weights_only=True.*GLOBAL posix.system"):
        dcp_manifest.load({"extra": {"lr": 0.0}}, folder)
    assert not (tmp_path / "pwned").exists()


def _torch_saved(value) -> bytes:
    import io

    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()
