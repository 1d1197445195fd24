"""Attention analyses on constructed cases with known answers: entropy, distance,
attention to chosen tokens, rollout, flow, head roles (induction on a trained model)."""

from __future__ import annotations

import math

import pytest
import torch

import glassformer as gf
from glassformer import inspect as gi
from glassformer.train.runs import prepare
from glassformer.train.settings import apply_overrides, load_preset
from glassformer.train.trainer import Trainer
from tests.conftest import tiny_model

PATTERNS = "blocks.*.attn.pattern"


def make_trace(*layers: torch.Tensor, tokens=None, prefix="") -> gi.Trace:
    """A Trace holding hand-made patterns: each layer h t s (or t s: one head)."""
    activations = {}
    for i, pattern in enumerate(layers):
        pattern = pattern if pattern.dim() == 3 else pattern[None]
        activations[f"{prefix}blocks.{i}.attn.pattern"] = pattern[None].float()  # b h t s
    t = layers[0].shape[-2]
    return gi.Trace(activations, torch.zeros(1, t, dtype=torch.long), tokens)


def causal_uniform(t: int) -> torch.Tensor:
    """Uniform attention over the visible keys 0..i: t s."""
    mask = torch.ones(t, t).tril()
    return mask / mask.sum(-1, keepdim=True)


def previous_token(t: int) -> torch.Tensor:
    """Attention from i to i - 1 (the first token to itself): t s."""
    pattern = torch.zeros(t, t)
    pattern[0, 0] = 1
    pattern[torch.arange(1, t), torch.arange(t - 1)] = 1
    return pattern


def set_head(head: int, pattern: torch.Tensor):
    """A hook that overwrites one head's pattern (b h t s) with ``pattern`` (t s)."""

    def hook(x, name):
        if x.shape[-2:] != pattern.shape:
            return None  # another pass (head_roles' induction sequences): leave it alone
        x = x.clone()
        x[:, head] = pattern
        return x

    return hook


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Toy models run no faster on more threads, and on a busy machine extra threads wait
    on each other (the induction training below: 3 s on one thread, up to a minute on two)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def decoder():
    return gf.LanguageModel(tiny_model())


# -- hooks set a known pattern into a real forward pass ---------------------------------------


def test_a_hooked_previous_token_head_scores_one_and_tops_the_roles(decoder):
    ids = list(range(3, 15))
    with decoder.net.hooks({"blocks.0.attn.pattern": set_head(2, previous_token(len(ids)))}):
        trace = decoder.trace(ids, names=PATTERNS)
        roles = gi.head_roles(decoder, ids, top=2)
    scores = gi.previous_token_scores(trace)
    assert scores.shape == (2, 4)
    assert scores[0, 2].item() == pytest.approx(1.0, abs=1e-6)
    assert scores.flatten().argmax().item() == 2  # layer 0, head 2
    assert roles.top["previous token"][0][:2] == (0, 2)
    assert roles.score("previous token", 0, 2) == pytest.approx(1.0, abs=1e-6)
    positional, offsets = gi.positional_scores(trace)
    assert positional[0, 2].item() == pytest.approx(1.0, abs=1e-6) and offsets[0, 2].item() == 1
    assert "L0H2 1.00" in str(roles)
    # a previous-token head reads one token back: distance 1 everywhere but the first query
    assert gi.attended_distance(trace)[0, 2, 1:].tolist() == [1.0] * (len(ids) - 1)


def test_uniform_attention_has_entropy_log_of_the_visible_keys(decoder):
    t = 9
    with decoder.net.hooks({PATTERNS: set_head(1, causal_uniform(t))}):
        trace = decoder.trace(list(range(t)), names=PATTERNS)
    entropy = gi.attention_entropy(trace)  # layers h t
    expected = torch.log(torch.arange(1, t + 1).float())
    torch.testing.assert_close(entropy[:, 1], expected.expand(2, t))
    assert gi.mean_attention_entropy(trace)[0, 1].item() == pytest.approx(expected.mean().item(), rel=1e-6)
    # mean distance under uniform causal attention: (0 + 1 + ... + i) / (i + 1) = i / 2
    torch.testing.assert_close(gi.attended_distance(trace)[:, 1], (torch.arange(t) / 2).expand(2, t))
    # one-hot attention has entropy 0 (0 log 0 = 0 for the masked keys)
    one_hot = gi.attention_entropy(make_trace(previous_token(5)))
    assert one_hot.abs().max().item() == 0.0


def test_entropy_of_a_real_pass_lies_between_zero_and_log_t():
    lm = gf.LanguageModel(tiny_model(family="encoder"))
    trace = lm.trace(list(range(1, 8)), names=PATTERNS)
    entropy = gi.attention_entropy(trace)
    assert entropy.shape == (2, 4, 7)
    assert bool((entropy > 0).all()) and bool((entropy <= math.log(7) + 1e-6).all())


def test_attention_to_chosen_positions_and_separators():
    t = 5
    sink = torch.zeros(t, t)
    sink[:, 0] = 1  # every query on token 0
    on_sep = torch.zeros(t, t)
    on_sep[:, 4] = 1  # every query on the final [SEP]
    tokens = ["[CLS]", "the", "cat", ".", "[SEP]"]
    trace = make_trace(torch.stack([sink, on_sep]), tokens=tokens)
    assert gi.first_token_attention(trace).tolist() == [[1.0, 0.0]]
    assert gi.first_token_scores(trace).tolist() == [[1.0, 0.0]]
    assert gi.separator_positions(tokens) == [0, 3, 4]
    # queries after [CLS] (1..4): head 0 gives all to [CLS], head 1 all to [SEP]
    assert gi.separator_attention(trace).tolist() == [[1.0, 1.0]]
    assert gi.separator_attention(trace, separators=["[SEP]"]).tolist() == [[0.0, 1.0]]
    assert gi.attention_to(trace, [3]).tolist() == [[0.0, 0.0]]
    assert gi.attention_to(trace, [3, 4]).tolist() == [[0.0, 1.0]]
    # a causal pattern: only the queries that can see key 2 count, i = 2, 3, 4
    causal = make_trace(causal_uniform(t))
    assert gi.attention_to(causal, [2]).item() == pytest.approx((1 / 3 + 1 / 4 + 1 / 5) / 3)
    assert gi.first_token_attention(causal).item() == pytest.approx((1 / 2 + 1 / 3 + 1 / 4 + 1 / 5) / 4)
    with pytest.raises(ValueError, match="no separator token"):
        gi.separator_attention(make_trace(sink, tokens=["a", "b", "c", "d", "e"]))
    with pytest.raises(ValueError, match="out of range"):
        gi.attention_to(trace, [5])


# -- rollout and flow ----------------------------------------------------------------------------


def test_rollout_of_identity_attention_is_identity():
    eye = torch.eye(6)
    trace = make_trace(eye, eye, eye)
    torch.testing.assert_close(gi.attention_rollout(trace), eye)
    torch.testing.assert_close(gi.attention_flow(trace), eye)


@pytest.mark.parametrize("family", ["decoder", "encoder"])
def test_rollout_rows_sum_to_one_on_a_real_pass(family):
    lm = gf.LanguageModel(tiny_model(family=family, n_layers=3))
    trace = lm.trace(list(range(1, 11)), names=PATTERNS)
    by_layer = gi.rollout_by_layer(trace)
    assert by_layer.shape == (3, 10, 10)
    torch.testing.assert_close(by_layer.sum(-1), torch.ones(3, 10))
    torch.testing.assert_close(by_layer[-1], gi.attention_rollout(trace))
    residual = gi.residual_attention(trace)
    torch.testing.assert_close(by_layer[0], residual[0])
    torch.testing.assert_close(by_layer[2], residual[2] @ residual[1] @ residual[0])
    if family == "decoder":  # no output draws on a later input
        assert by_layer[-1].triu(1).abs().max().item() == 0.0


def test_attention_flow_on_a_two_layer_toy_graph_matches_the_hand_computed_value():
    # A = 2 Ã - I for  Ã = [[1, 0, 0], [.5, .5, 0], [.25, .25, .5]]  in both layers
    pattern = torch.tensor([[1.0, 0, 0], [1, 0, 0], [0.5, 0.5, 0]])
    trace = make_trace(pattern, pattern)
    expected_residual = torch.tensor([[1.0, 0, 0], [0.5, 0.5, 0], [0.25, 0.25, 0.5]])
    torch.testing.assert_close(gi.residual_attention(trace)[0], expected_residual)
    flow = gi.attention_flow(trace)
    # from output 2: via (1,0) .25 + via (1,1) min(.25, .5) + via (1,2) min(.5, .25) to input 0 ...
    torch.testing.assert_close(flow[2], torch.tensor([0.75, 0.5, 0.5]))
    torch.testing.assert_close(flow[1], torch.tensor([1.0, 0.5, 0.0]))
    torch.testing.assert_close(flow[0], torch.tensor([1.0, 0.0, 0.0]))
    # rollout of the same graph multiplies instead: row 2 = Ã[2] @ Ã
    torch.testing.assert_close(gi.attention_rollout(trace)[2], torch.tensor([0.5, 0.25, 0.25]))


def test_attention_flow_matches_networkx_on_a_real_pass():
    nx = pytest.importorskip("networkx")
    lm = gf.LanguageModel(tiny_model(family="encoder"))
    trace = lm.trace(list(range(1, 6)), names=PATTERNS)
    residual = gi.residual_attention(trace).double()
    n_layers, t = residual.shape[:2]
    graph = nx.DiGraph()
    for layer in range(n_layers):
        for i in range(t):
            for j in range(t):
                graph.add_edge((layer + 1, i), (layer, j), capacity=float(residual[layer, i, j]))
    ours = gi.attention_flow(trace, outputs=[0, 4])
    for out in (0, 4):
        theirs = [nx.maximum_flow_value(graph, (n_layers, out), (0, j)) for j in range(t)]
        theirs = torch.tensor(theirs, dtype=torch.float64)
        torch.testing.assert_close(ours[out].double(), theirs, atol=1e-6, rtol=0)
    assert ours[1:4].abs().max().item() == 0.0  # rows not asked for stay 0


def test_attention_flow_refuses_long_inputs():
    eye = torch.eye(65)
    with pytest.raises(ValueError, match="max_tokens=64"):
        gi.attention_flow(make_trace(eye))


# -- induction ---------------------------------------------------------------------------------


def test_induction_score_follows_a_hooked_induction_pattern():
    lm = gf.LanguageModel(tiny_model(bos_token_id=0))
    seq_len = 6  # sequences are <bos> r r: query i of the second copy -> key i - seq_len + 1
    t = 1 + 2 * seq_len
    pattern = causal_uniform(t)
    for i in range(1 + seq_len, t):
        pattern[i] = 0
        pattern[i, i - seq_len + 1] = 1
    with lm.net.hooks({"blocks.1.attn.pattern": set_head(3, pattern)}):
        scores = gi.induction_scores(lm, seq_len=seq_len, n_seqs=2)
    assert scores[1, 3].item() == pytest.approx(1.0, abs=1e-6)
    assert scores.flatten().argmax().item() == 4 + 3


@pytest.fixture(scope="module")
def induction_model(tmp_path_factory):
    """A 2-layer decoder trained on the induction preset (length 8) for 150 steps (~3 s)."""
    torch.manual_seed(0)
    overrides = [
        "data.task={alphabet_size=26, length=8}",
        "train.steps=150",
        "train.batch_size=16",
        "train.warmup_steps=10",
        "train.tensorboard=false",
    ]
    run = apply_overrides(load_preset("induction"), overrides)
    directory = tmp_path_factory.mktemp("induction")
    prepared = prepare(run, directory, log=lambda _: None)
    trainer = Trainer(
        run, prepared.net, prepared.tokenizer, prepared.train_batches, prepared.val_batches, directory / "run"
    )
    for _ in range(run.train.steps):
        trainer.train_step()
    return gf.LanguageModel(prepared.net.eval(), prepared.tokenizer)


def test_induction_score_is_high_after_training_on_the_induction_task(induction_model):
    untrained = gf.LanguageModel(gf.build(induction_model.config).eval(), induction_model.tokenizer)
    trained_scores = gi.induction_scores(induction_model, seq_len=8, n_seqs=16)
    untrained_scores = gi.induction_scores(untrained, seq_len=8, n_seqs=16)
    print("induction scores after training:\n", trained_scores)
    assert trained_scores.max().item() > 0.5
    assert untrained_scores.max().item() < 0.3
    best = int(trained_scores.flatten().argmax())
    assert best // trained_scores.shape[1] == 1  # an induction head needs a previous layer to feed it


def test_induction_needs_a_decoder_and_room_for_two_copies(decoder):
    with pytest.raises(ValueError, match="causal decoder-only"):
        gi.induction_scores(gf.LanguageModel(tiny_model(family="encoder")))
    with pytest.raises(ValueError, match="max_seq_len=64"):
        gi.induction_scores(decoder, seq_len=40)
    with pytest.raises(ValueError, match="token_ids"):
        gi.induction_scores(decoder, token_ids=[1, 999])


# -- encoder-decoder names, and bad input --------------------------------------------------------


def test_encoder_decoder_traces_take_a_prefix():
    lm = gf.LanguageModel(tiny_model(family="encoder_decoder", n_decoder_layers=3, decoder_start_token_id=0))
    trace = lm.trace([1, 2, 3, 4, 5], names="*attn.pattern", decoder_input=[1, 2, 3])
    assert gi.attention_entropy(trace, prefix="encoder.").shape == (2, 4, 5)
    assert gi.attention_entropy(trace, prefix="decoder.").shape == (3, 4, 3)
    cross = gi.attention_patterns(trace, prefix="decoder.", kind="cross_attn")
    assert cross.shape == (3, 4, 3, 5)
    to_first = gi.first_token_attention(trace, "decoder.", "cross_attn")  # every query counts
    torch.testing.assert_close(to_first, cross[..., 0].mean(-1))
    assert gi.attention_rollout(trace, prefix="decoder.").shape == (3, 3)
    with pytest.raises(ValueError, match="prefix='encoder.'"):
        gi.attention_entropy(trace)
    with pytest.raises(ValueError, match="prefix='decoder.'"):
        gi.attention_patterns(trace, prefix="encoder.", kind="cross_attn")
    roles = gi.head_roles(lm, [1, 2, 3, 4, 5])  # the encoder's heads by default
    assert "induction" not in roles.scores and roles.scores["positional"].shape == (2, 4)


def test_bad_input_gets_a_clear_error(decoder):
    trace = decoder.trace([1, 2, 3, 4], names=PATTERNS)
    assert gi.head_pattern(trace, 1, 3).shape == (4, 4)
    with pytest.raises(ValueError, match=r"layer=2 is out of range: this model has 2 layers \(0..1\)"):
        gi.head_pattern(trace, 2, 0)
    with pytest.raises(ValueError, match=r"head=4 is out of range: this model has 4 heads \(0..3\)"):
        gi.head_pattern(trace, 0, 4)
    roles = gi.head_roles(decoder, [1, 2, 3, 4])
    with pytest.raises(ValueError, match="head=-1 is out of range"):
        roles.score("induction", 0, -1)
    with pytest.raises(ValueError, match="role='copying'"):
        roles.score("copying", 0, 0)
    with pytest.raises(ValueError, match="kind='self'"):
        gi.attention_entropy(trace, kind="self")
    with pytest.raises(ValueError, match="holds no blocks"):
        gi.attention_entropy(decoder.trace([1, 2], names="blocks.*.attn.scores"))
    with pytest.raises(ValueError, match=r"layers \[1\] only"):
        gi.attention_entropy(decoder.trace([1, 2], names="blocks.1.attn.pattern"))
    with pytest.raises(ValueError, match="has 120 tokens, more than max_seq_len=64"):
        gi.head_roles(decoder, list(range(1, 61)) * 2)
