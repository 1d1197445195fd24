"""Building on the meta device (`build_meta`, `build(initialize=False)`) is cheap: shapes only,
no fill, and none of torch's reference decompositions (whose first use imports torch._dynamo,
half a second of every first model load)."""

import subprocess
import sys

import torch

from glassformer import ModelConfig
from glassformer.models import build, build_meta

BASE = dict(vocab_size=50, d_model=32, n_layers=2, n_heads=4, max_seq_len=32)
CONFIGS = [
    *(dict(positions=p) for p in ("rope", "alibi", "t5_relative", "learned", "sinusoidal")),
    dict(positions="rope", n_experts=4, experts_per_token=2, rope_local_base=10.0, attn_window=4),
    dict(family="encoder_decoder", positions="t5_relative", decoder_start_token_id=0),
    dict(family="encoder", vocab_size=1, image_size=8, patch_size=4, n_classes=3, mlm_head=False),
]


def test_meta_models_have_the_built_models_shapes_and_buffers():
    for overrides in CONFIGS:
        config = ModelConfig(**{**BASE, **overrides})
        meta, empty = build_meta(config), build(config, initialize=False)
        assert all(p.is_meta for p in meta.parameters())
        shapes = lambda net: {n: tuple(p.shape) for n, p in net.state_dict().items()}  # noqa: E731
        assert shapes(meta) == shapes(empty) == shapes(build(config)), overrides
        reference = build(config)
        for name, buffer in empty.named_buffers():  # computed buffers are computed again
            torch.testing.assert_close(buffer, dict(reference.named_buffers())[name], msg=name)


def test_building_on_meta_imports_no_dynamo():
    code = (
        "import sys; from glassformer import ModelConfig; from glassformer.models import build_meta, build\n"
        f"for c in {CONFIGS!r}:\n"
        f"    build_meta(ModelConfig(**{{**{BASE!r}, **c}})); build(ModelConfig(**{{**{BASE!r}, **c}}), "
        "initialize=False)\n"
        "print('torch._dynamo' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "False", result.stderr
