"""glassformer.fast_int8: 8-bit decode weights within their stated bound, used only where faster."""

import pytest
import torch

import glassformer as gf
from glassformer import fast, fast_decode, fast_int8
from glassformer.generate import generate_ids
from glassformer.nn.kv_cache import KVCache
from tests.test_fast_decode import tiny_net


@pytest.mark.parametrize(("out_features", "in_features"), [(96, 64), (3072, 576), (576, 1536)])
@pytest.mark.parametrize("rows", [1, 3, 8])
def test_every_output_is_within_the_stated_bound(out_features, in_features, rows):
    torch.manual_seed(rows)
    weight = torch.randn(out_features, in_features) * 0.05
    weight[0, 0] = 3.0  # an outlier: its row's scale is large, and so is that row's bound
    product = fast_int8.Int8Product(weight)
    x = torch.randn(rows, in_features) * 2
    bias = torch.randn(out_features)
    y = product(x, bias)
    error = (y - (x @ weight.t() + bias)).abs()
    bound = product.error_bound(x, y - bias)
    assert (error <= bound).all(), (error - bound).max()
    assert bound[:, 1:].max() < 0.05 * (x.abs() @ weight[1:].abs().t()).max()  # not vacuous


def test_rows_are_stored_as_127_levels_of_their_largest_weight():
    weight = torch.tensor([[0.5, -1.0, 0.25], [0.0, 0.0, 0.0]])
    product = fast_int8.Int8Product(weight)
    assert product.q.dtype == torch.int8 and product.q[0].tolist() == [64, -127, 32]
    assert product.q[1].tolist() == [0, 0, 0]  # an all-zero row: no division by zero
    torch.testing.assert_close(product.scales[0], torch.tensor(1.0 / 127))


def test_an_int8_step_stays_near_the_modules_and_says_what_it_chose(monkeypatch):
    monkeypatch.setattr(fast_decode, "faster_than_float32", lambda *_: (True, "int8 1 us vs float32 9 us"))
    net = tiny_net(n_kv_heads=2)
    fast_decode.use_weights(net, "int8")
    step = fast_decode.step_for(net)
    assert (step.asked, step.weights, step.reason) == ("int8", "int8", "faster: int8 1 us vs float32 9 us")
    assert isinstance(step.layers[0].products["gate_up"][0], fast_int8.Int8Product) and step.head is not None
    prompt = torch.randint(0, 67, (1, 6))
    ours, theirs = KVCache.for_model(net.config, 1, 20), KVCache.for_model(net.config, 1, 20)
    with torch.no_grad():
        ids = net(prompt, cache=ours)[:, -1:].argmax(-1)
        net(prompt, cache=theirs)
        for _ in range(8):
            logits, reference = step(ids, ours), net(ids, cache=theirs)
            assert (logits - reference).abs().max() < 0.05 * reference.abs().max()
            ids = reference[:, -1:].argmax(-1)
    fast_decode.use_weights(net, "float32")
    assert fast_decode.step_for(net).weights == "float32"  # asked again: a new layout


def test_int8_is_not_used_where_it_measures_slower(monkeypatch):
    monkeypatch.setattr(fast_decode, "faster_than_float32", lambda *_: (False, "int8 9 us vs float32 1 us"))
    net = tiny_net()
    fast_decode.use_weights(net, "int8")
    step = fast_decode.step_for(net)
    assert step.weights == "float32" and step.reason.startswith("slower, so float32")
    settings = gf.GenerationSettings(max_new_tokens=10, greedy=True)
    ours = generate_ids(net, [[1, 2, 3]], settings)
    fast.disable(net)
    assert generate_ids(net, [[1, 2, 3]], settings) == ours  # float32: greedy-identical


def test_unknown_weights_are_refused():
    with pytest.raises(ValueError, match="allowed values: float32, int8, q8_0, q4_0, q4_1"):
        fast_decode.use_weights(tiny_net(), "int4")


def test_the_timing_names_both_kernels():
    faster, timings = fast_decode.faster_than_float32("int8", 64, 32, torch.get_num_threads())
    assert isinstance(faster, bool) and "int8" in timings and "float32" in timings


def test_smollm2_int8_next_token_agrees_with_float32_on_20_prompts():
    """The measured, stated effect on a real model: teacher-forced next tokens (each position's
    input the same for both), top-1 agreement and the KL divergence of the distributions."""
    lm = gf.load("smollm2-135m-instruct")
    texts = [f"{start} {i}" for i, start in enumerate(["Once upon a time", "The capital of", "def f(x):",
             "In 1969", "Water boils at"] * 4)]  # fmt: skip
    agree, kl = fast_decode.compare_weights(lm.net, [lm.tokenizer.encode(t) for t in texts], new_tokens=8)
    assert agree >= 0.85 and kl <= 0.02, (agree, kl)
