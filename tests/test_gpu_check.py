"""benchmarks/gpu_check.py runs on the CPU: it says the CUDA part is skipped, and its decode and
parity checks (and the MFU step, on a tiny model) work, so the script is ready for a GPU."""

import torch

from benchmarks import gpu_check


def test_gpu_check_runs_tiny_on_the_cpu(capsys):
    report = gpu_check.main(["--tiny"])
    out = capsys.readouterr().out
    if not torch.cuda.is_available():
        assert "1. MFU: skipped, no CUDA GPU here" in out
        assert report["device"] == "cpu" and "mfu" not in report
    assert set(report["decode"]) == {1, 8} and all(speed > 0 for speed in report["decode"].values())
    assert report["parity"]["float32"] < 1e-4  # the same weights, the same logits
    assert report["parity"]["bf16 autocast"] < 0.1


def test_the_mfu_step_trains_and_reports(capsys):
    fraction = gpu_check.mfu(gpu_check.TINY, torch.device("cpu"), batch=2, steps=2, compile=False, peak=1.0)
    assert 0 < fraction < 1
    assert "MFU" in capsys.readouterr().out
    assert gpu_check.peak_tflops("NVIDIA H100 80GB HBM3", None) == 989.0
    assert gpu_check.peak_tflops("Some card", None) is None
    assert gpu_check.peak_tflops("Some card", 100.0) == 100.0
