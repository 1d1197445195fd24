"""Training precision: ``train.dtype = "auto"`` decided by capability and a cached measurement,
fp16 autocast with a gradient scaler (trains, and its scale is checkpointed and resumed)."""

import json

import pytest
import torch

from glassformer.data_home import default_data_dir
from glassformer.train import checkpoint, precision
from glassformer.train.settings import TrainConfig
from tests.conftest import tiny
from tests.test_trainer import interrupt_after, make_trainer, tiny_run

CPU = torch.device("cpu")


def test_presets_and_the_default_ask_for_auto():
    assert TrainConfig().dtype == "auto"
    assert tiny_run_dtype("shakespeare-char") == "auto"


def tiny_run_dtype(name):
    from glassformer.train.settings import load_preset

    return load_preset(name).train.dtype


def test_an_unknown_dtype_names_the_allowed_ones():
    with pytest.raises(ValueError, match="auto, float32, bfloat16, float16"):
        TrainConfig(dtype="half")
    with pytest.raises(ValueError, match="allowed values"):
        precision.choose("fp8", tiny(), CPU, 64)


def test_auto_measures_once_per_machine_and_caches_it_in_the_data_home(monkeypatch):
    first = precision.choose("auto", tiny(), CPU, 64)
    cache = json.loads((default_data_dir() / precision.CACHE_FILE).read_text())
    (key,) = cache
    assert key.startswith(precision.machine_key(CPU)) and torch.__version__ in key
    assert cache[key]["float32_ms"] > 0 and cache[key]["bfloat16_ms"] > 0
    assert first.requested == "auto" and first.chosen in ("float32", "bfloat16")
    assert "ms vs" in first.reason and precision.machine_name(CPU) in first.reason

    def no_second_measurement(*args, **kwargs):
        raise AssertionError("measured again: the cache was not read")

    monkeypatch.setattr(precision, "time_products", no_second_measurement)
    assert precision.choose("auto", tiny(), CPU, 64) == first


def test_one_cpu_name_with_other_instruction_sets_is_another_machine(monkeypatch):
    monkeypatch.setattr(precision, "machine_name", lambda device: "CPU AMD EPYC")
    monkeypatch.setattr(precision, "cpu_flags", lambda: {"avx2", "fma", "sse2"})
    zen3 = precision.machine_key(CPU)
    monkeypatch.setattr(precision, "cpu_flags", lambda: {"avx2", "fma", "avx512f", "avx512_bf16"})
    zen4 = precision.machine_key(CPU)
    assert zen3 != zen4 and zen3.startswith("CPU AMD EPYC [avx2 fma]") and "avx512_bf16" in zen4


@pytest.mark.parametrize(
    ("capable", "fp32_ms", "bf16_ms", "chosen", "words"),
    [
        (True, 3.0, 1.0, "bfloat16", "3.00x faster"),
        (True, 1.7, 3.1, "float32", "1.82x slower"),
        (True, 1.0, 0.95, "float32", "under the 1.1x"),  # a tie is not worth bf16's rounding
        (False, 3.0, 1.0, "float32", "no bf16 instructions"),  # a fast measurement alone is not enough
    ],
)
def test_auto_takes_bf16_only_where_capable_and_measured_faster(
    monkeypatch, capable, fp32_ms, bf16_ms, chosen, words
):
    evidence = "CPU flags avx512_bf16" if capable else "no bf16 instructions in the CPU flags"
    monkeypatch.setattr(precision, "bf16_capability", lambda device: (capable, evidence))
    timing = {"float32_ms": fp32_ms, "bfloat16_ms": bf16_ms, "machine": "CPU Test"}
    monkeypatch.setattr(precision, "measured_speedup", lambda *args: timing)
    choice = precision.choose("auto", tiny(), CPU, 64)
    assert choice.chosen == chosen
    assert words in choice.reason
    assert choice.describe().startswith(f"dtype: auto -> {chosen} (bf16 autocast ")


def test_the_capability_reads_the_cpu_flags(monkeypatch):
    monkeypatch.setattr(precision, "cpu_flags", lambda: {"avx2", "amx_bf16"})
    assert precision.bf16_capability(CPU)[0]
    monkeypatch.setattr(precision, "cpu_flags", lambda: {"avx2", "fma"})
    capable, words = precision.bf16_capability(CPU)
    assert not capable and torch.backends.cpu.get_cpu_capability() in words


def test_the_run_records_what_it_chose_and_why(tmp_path):
    logged = []
    trainer = make_trainer(tiny_run(tmp_path, steps=4), tmp_path)
    trainer.log = logged.append
    trainer.fit()
    first = checkpoint.read_metrics(tmp_path / "run" / "metrics.jsonl")[0]
    setup = first["setup"]
    assert setup[0] == "device: auto -> cpu (" + setup[0].split("(", 1)[1]
    assert setup[1].startswith("dtype: auto -> ") and "ms vs" in setup[1]
    assert setup[1] in logged
    assert json.loads((tmp_path / "run" / "train_config.json").read_text())["train"]["dtype"] == "auto"


def test_float16_autocast_with_a_gradient_scaler_lowers_the_loss(tmp_path):
    trainer = make_trainer(tiny_run(tmp_path, steps=30, lr=3e-3, dtype="float16"), tmp_path)
    assert trainer.precision.chosen == "float16" and trainer.scaler.is_enabled()
    before = trainer.evaluate().loss
    losses = [trainer.train_step()[0] for _ in range(30)]
    assert all(map(torch.isfinite, torch.tensor(losses)))
    assert trainer.evaluate().loss < before - 0.3
    assert trainer.scaler.get_scale() > 0


def test_the_gradient_scale_is_checkpointed_and_resumed(tmp_path):
    run = tiny_run(tmp_path, steps=8, dtype="float16")
    first = make_trainer(run, tmp_path)
    first.scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=3)
    interrupt_after(first, 5)
    with pytest.raises(KeyboardInterrupt):
        first.fit()
    saved = checkpoint.load_trainer_state(tmp_path / "run")["scaler"]
    assert saved["scale"] == first.scaler.get_scale() and saved["growth_interval"] == 3
    second = make_trainer(run, tmp_path)
    assert second.scaler.get_scale() == 65536.0  # a fresh scaler's default, before the resume
    second.log = lambda _: None
    second._restore()
    assert second.scaler.state_dict() == first.scaler.state_dict()


def test_bfloat16_and_float32_runs_keep_no_scale(tmp_path):
    trainer = make_trainer(tiny_run(tmp_path, steps=3, dtype="bfloat16"), tmp_path)
    assert not trainer.scaler.is_enabled()
    trainer.fit()
    assert checkpoint.load_trainer_state(tmp_path / "run")["scaler"] == {}
