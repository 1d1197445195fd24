"""Flushing denormals: on inside the block, the previous setting back afterwards."""

import pytest
import torch

from glassformer.train.denormals import SMALLEST_DENORMAL, flush_denormal, flushing_denormals


@pytest.fixture
def flushing_off():
    """Start from flushing off and leave the process that way, whatever the test does."""
    if not torch.set_flush_denormal(False):
        pytest.skip("this CPU cannot flush denormals (torch.set_flush_denormal is unsupported)")
    yield
    torch.set_flush_denormal(False)


def test_the_probe_reads_what_torch_set(flushing_off):
    assert not flushing_denormals()
    assert torch.tensor([SMALLEST_DENORMAL], dtype=torch.float64).mul(1.0).item() > 0  # a real denormal
    torch.set_flush_denormal(True)
    assert flushing_denormals()
    torch.set_flush_denormal(False)
    assert not flushing_denormals()


def test_the_block_flushes_and_restores_the_previous_setting(flushing_off):
    with flush_denormal() as supported:
        assert supported and flushing_denormals()
        with flush_denormal(enabled=False):
            assert not flushing_denormals()
        assert flushing_denormals()  # the inner block put back the outer one's setting
    assert not flushing_denormals()
    torch.set_flush_denormal(True)  # set by someone else before the block: kept
    with flush_denormal(enabled=False):
        assert not flushing_denormals()
    assert flushing_denormals()


def test_an_exception_restores_it_too(flushing_off):
    with pytest.raises(KeyboardInterrupt), flush_denormal():
        raise KeyboardInterrupt
    assert not flushing_denormals()
