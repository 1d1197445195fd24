"""Generation: greedy, sampling and beam search against naive loops and invariants.

The reference for greedy decoding is the plainest loop there is: run the model on the
whole sequence, take the argmax, append, repeat. The KV cache, left padding and beam
search must agree with it (or, for beams, with exhaustive search).
"""

from __future__ import annotations

import itertools

import pytest
import torch

from glassformer import ModelConfig, build
from glassformer.generate import GenerationSettings, _beam_search, generate_ids, stream_ids
from glassformer.sampling import apply_repetition_penalty, suppress_tokens, top_k_filter, top_p_filter

V = 64
GREEDY = GenerationSettings(max_new_tokens=8, greedy=True, stop_token_ids=())
VARIED = GenerationSettings(max_new_tokens=8, greedy=True, repetition_penalty=5.0, stop_token_ids=())
SAMPLED = GenerationSettings(max_new_tokens=8, temperature=0.8, top_k=20, seed=3, stop_token_ids=())
PROMPTS = [[3, 14, 15, 9, 2], [26, 5], [35, 8, 9, 7]]


def tiny(**overrides):
    """A 2-layer model with large random weights: sharp next-token distributions that
    depend on the whole context, so a wrong cache, position or mask changes the tokens.

    (With the usual small init a random model repeats one token whatever its input.)"""
    fields = dict(vocab_size=V, d_model=32, n_layers=2, n_heads=4, max_seq_len=64, tie_embeddings=False)
    torch.manual_seed(0)
    net = build(ModelConfig(**{**fields, **overrides})).eval()
    with torch.no_grad():
        for name, p in net.named_parameters():
            if "embed" in name or name == "shared.weight":
                p.normal_(0.0, 1.0)
            elif p.dim() == 2:  # matrices; biases and norm gains keep their init (0 and 1)
                p.normal_(0.0, 2.0 / p.shape[1] ** 0.5)
    return net


def tiny_seq2seq(**overrides):
    fields = dict(family="encoder_decoder", positions="t5_relative", decoder_start_token_id=0)
    return tiny(**{**fields, **overrides})


def naive_greedy(net, prompt, n, stop=()):
    """argmax(net(full sequence)) in a loop: no cache, no padding, no batch."""
    seq, new = list(prompt), []
    for _ in range(n):
        if net.config.family == "encoder_decoder":
            source = torch.tensor([prompt])
            logits = net.decode(torch.tensor([[0, *new]]), net.encode(source))
        else:
            logits = net(torch.tensor([seq]))
        token = int(logits[0, -1].argmax())
        seq.append(token)
        new.append(token)
        if token in stop:
            break
    return new


def log_prob(net, prompt, new):
    """sum_i log p(new_i | prompt, new_<i) under a decoder-only model."""
    seq = torch.tensor([prompt + new])
    with torch.no_grad():
        logp = net(seq)[0, len(prompt) - 1 : -1].log_softmax(-1)  # n v
    return float(logp.gather(1, torch.tensor(new)[:, None]).sum())


# ---------------------------------------------------------------------------------------
# greedy decoding and the cache


def test_greedy_equals_naive_loop():
    net = tiny()
    for prompt in PROMPTS:
        assert generate_ids(net, [prompt], GREEDY) == [naive_greedy(net, prompt, 8)]


def test_stop_token_ends_a_row_and_is_included():
    net = tiny()
    free = [naive_greedy(net, p, 8) for p in PROMPTS]
    first_new = next(i for i, token in enumerate(free[0]) if token != free[0][0])
    stop = free[0][first_new]
    settings = GenerationSettings(max_new_tokens=8, greedy=True, stop_token_ids=(stop,))
    out = generate_ids(net, PROMPTS, settings)
    assert out[0] == free[0][: first_new + 1]
    assert out == [naive_greedy(net, p, 8, stop=(stop,)) for p in PROMPTS]
    assert len({len(row) for row in out}) > 1  # rows stopped at different steps
    # Stop ids default to the config's eos_token_id.
    with_eos = tiny(eos_token_id=stop)
    assert generate_ids(with_eos, PROMPTS, GenerationSettings(max_new_tokens=8, greedy=True)) == out


def test_min_new_tokens_suppresses_stop_tokens():
    net = tiny()
    prompt = PROMPTS[2]
    stop = naive_greedy(net, prompt, 8)[2]  # greedy would stop after 3 tokens
    seq, expected = list(prompt), []
    while len(expected) < 8 and stop not in expected:
        logits = net(torch.tensor([seq]))[0, -1:]
        if len(expected) < 4:
            logits = suppress_tokens(logits, torch.tensor([stop]))
        expected.append(int(logits.argmax()))
        seq.append(expected[-1])
    assert len(expected) == 5  # stops at the first step allowed: the boundary is exercised
    settings = GenerationSettings(max_new_tokens=8, min_new_tokens=4, greedy=True, stop_token_ids=(stop,))
    assert generate_ids(net, [prompt], settings) == [expected]


POSITIONS = ["learned", "sinusoidal", "rope", "alibi", "t5_relative"]


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1], ids=["mha", "gqa", "mqa"])
@pytest.mark.parametrize("positions", POSITIONS)
def test_cached_equals_uncached(positions, n_kv_heads):
    net = tiny(positions=positions, n_kv_heads=n_kv_heads)
    for settings in (GREEDY, VARIED, SAMPLED):
        cached = generate_ids(net, PROMPTS, settings)
        assert cached == generate_ids(net, PROMPTS, settings, use_cache=False)
    assert generate_ids(net, PROMPTS[:1], GREEDY) == [naive_greedy(net, PROMPTS[0], 8)]


@pytest.mark.parametrize("positions", POSITIONS)
def test_left_padded_rows_equal_prompts_alone(positions):
    net = tiny(positions=positions, n_kv_heads=2, pad_token_id=1)
    for settings in (GREEDY, VARIED):
        batch = generate_ids(net, PROMPTS, settings)
        assert batch == [generate_ids(net, [p], settings)[0] for p in PROMPTS]
    assert generate_ids(net, PROMPTS, GREEDY) == [naive_greedy(net, p, 8) for p in PROMPTS]


@pytest.mark.parametrize("positions", ["rope", "alibi"])
def test_sliding_window_cached_equals_uncached_and_alone(positions):
    net = tiny(positions=positions, attn_window=3)
    for settings in (VARIED, SAMPLED):
        assert generate_ids(net, PROMPTS, settings) == generate_ids(net, PROMPTS, settings, use_cache=False)
    assert generate_ids(net, PROMPTS, VARIED) == [generate_ids(net, [p], VARIED)[0] for p in PROMPTS]


def test_padded_tensor_with_mask_any_side():
    net = tiny()
    expected = generate_ids(net, PROMPTS, VARIED)
    width = max(map(len, PROMPTS))
    right = torch.tensor([p + [0] * (width - len(p)) for p in PROMPTS])
    mask = torch.tensor([[1] * len(p) + [0] * (width - len(p)) for p in PROMPTS])
    assert generate_ids(net, right, VARIED, attention_mask=mask) == expected


def test_max_new_tokens_zero_gives_empty_rows():
    assert generate_ids(tiny(), PROMPTS, GenerationSettings(max_new_tokens=0)) == [[], [], []]


@pytest.mark.parametrize("positions", ["t5_relative", "sinusoidal"])
def test_encoder_decoder_cached_equals_uncached_and_naive(positions):
    net = tiny_seq2seq(positions=positions, n_kv_heads=2)
    for settings in (GREEDY, VARIED, SAMPLED):
        assert generate_ids(net, PROMPTS, settings) == generate_ids(net, PROMPTS, settings, use_cache=False)
    varied = generate_ids(net, PROMPTS, VARIED)
    assert varied == [generate_ids(net, [p], VARIED)[0] for p in PROMPTS]  # padded sources = alone
    assert generate_ids(net, PROMPTS, GREEDY) == [naive_greedy(net, p, 8) for p in PROMPTS]
    beams = GenerationSettings(max_new_tokens=6, num_beams=3, stop_token_ids=(varied[1][2],))
    assert generate_ids(net, PROMPTS, beams) == generate_ids(net, PROMPTS, beams, use_cache=False)


def test_encoder_decoder_starts_from_pad_when_no_start_token():
    with_pad = tiny_seq2seq(decoder_start_token_id=None, pad_token_id=0)
    assert generate_ids(with_pad, PROMPTS, GREEDY) == [naive_greedy(with_pad, p, 8) for p in PROMPTS]


# ---------------------------------------------------------------------------------------
# sampling


def test_same_seed_same_sample_and_different_seeds_differ():
    net = tiny()

    def draw(seed):
        return generate_ids(net, PROMPTS, GenerationSettings(max_new_tokens=12, temperature=2.0, seed=seed))

    assert draw(1) == draw(1)
    assert draw(1) != draw(2)


@pytest.mark.parametrize(
    "settings",
    [dict(top_k=1), dict(top_p=1e-6), dict(temperature=0.0), dict(temperature=0.5, top_k=1, top_p=0.5)],
    ids=["top_k=1", "tiny_top_p", "temperature=0", "combined"],
)
def test_degenerate_sampling_is_greedy(settings):
    net = tiny()
    sampled = GenerationSettings(max_new_tokens=8, seed=0, stop_token_ids=(), **settings)
    assert generate_ids(net, PROMPTS, sampled) == generate_ids(net, PROMPTS, GREEDY)


def test_repetition_penalty_hand_computed():
    scores = torch.tensor([[2.0, -1.0, 0.5, -3.0, 4.0], [1.0, 1.0, 1.0, 1.0, 1.0]])
    seen = torch.tensor([[0, 1, 1, 4], [2, 2, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 1]])  # token 4 in row 0 is padding
    out = apply_repetition_penalty(scores, seen, 2.0, mask)
    # positive scores are divided, negative ones multiplied; each seen id once, pads ignored
    assert out.tolist() == [[1.0, -2.0, 0.5, -3.0, 4.0], [0.5, 1.0, 0.5, 1.0, 1.0]]


def test_repetition_penalty_in_generation_matches_naive_loop():
    net = tiny()
    prompt, penalty = PROMPTS[0], 1.8
    seq, new = list(prompt), []
    for _ in range(8):
        logits = net(torch.tensor([seq]))[0, -1:]
        token = int(apply_repetition_penalty(logits, torch.tensor([seq]), penalty).argmax())
        seq.append(token)
        new.append(token)
    settings = GenerationSettings(
        max_new_tokens=8, greedy=True, repetition_penalty=penalty, stop_token_ids=()
    )
    assert generate_ids(net, [prompt], settings) == [new]
    assert new != naive_greedy(net, prompt, 8)  # the penalty changed something


def test_top_p_on_a_known_distribution():
    probs = torch.tensor([[0.05, 0.4, 0.1, 0.3, 0.15]])
    kept = lambda p: (top_p_filter(probs.log(), p) > float("-inf")).int().tolist()[0]
    assert kept(0.35) == [0, 1, 0, 0, 0]  # 0.4 alone covers 0.35
    assert kept(0.6) == [0, 1, 0, 1, 0]  # 0.4 + 0.3
    assert kept(0.8) == [0, 1, 0, 1, 1]  # 0.4 + 0.3 + 0.15
    assert kept(1.0) == [1, 1, 1, 1, 1]
    assert kept(1e-9) == [0, 1, 0, 0, 0]  # always at least the most likely token


def test_top_k_and_suppress():
    scores = torch.tensor([[0.1, 3.0, -2.0, 2.0]])
    assert top_k_filter(scores, 2).tolist() == [[float("-inf"), 3.0, float("-inf"), 2.0]]
    assert top_k_filter(scores, 10).tolist() == scores.tolist()
    assert suppress_tokens(scores, torch.tensor([1, 3])).argmax().item() == 0


def test_stream_ids_yields_what_generate_ids_returns():
    net = tiny()
    stop = naive_greedy(net, PROMPTS[2], 8)[4]
    for settings in (
        GenerationSettings(max_new_tokens=8, greedy=True, stop_token_ids=(stop,)),
        GenerationSettings(max_new_tokens=8, temperature=1.5, top_p=0.9, seed=7),
    ):
        expected = generate_ids(net, [PROMPTS[2]], settings)[0]
        assert list(stream_ids(net, PROMPTS[2], settings)) == expected
        assert list(stream_ids(net, torch.tensor(PROMPTS[2]), settings)) == expected
    assert len(expected) == 8


# ---------------------------------------------------------------------------------------
# beam search


def test_one_beam_is_greedy():
    # generate_ids sends num_beams=1 to greedy decoding, so call the beam search itself.
    net = tiny()
    one_beam = GenerationSettings(max_new_tokens=8, num_beams=1, greedy=True)
    assert _beam_search(net, PROMPTS, one_beam, (), use_cache=True) == generate_ids(net, PROMPTS, GREEDY)
    # With a stop token, one beam is greedy when scores are not length-normalized.
    stop = (naive_greedy(net, PROMPTS[0], 8)[3],)
    one_beam = GenerationSettings(max_new_tokens=8, num_beams=1, greedy=True, length_penalty=0.0)
    greedy = GenerationSettings(max_new_tokens=8, greedy=True, stop_token_ids=stop)
    assert _beam_search(net, PROMPTS, one_beam, stop, use_cache=True) == generate_ids(net, PROMPTS, greedy)


def naive_beam_search(net, prompt, k, n):
    """Keep the k best prefixes by summed log-probability, recomputing every sequence.

    Without stop tokens this is all HF's beam search does: every hypothesis has n tokens,
    so the length penalty cannot reorder them."""
    beams = [([], 0.0)]
    for _ in range(n):
        candidates = []
        for new, score in beams:
            logp = net(torch.tensor([prompt + new]))[0, -1].log_softmax(-1)
            candidates += [(new + [token], score + float(logp[token])) for token in range(V)]
        beams = sorted(candidates, key=lambda c: -c[1])[:k]
    return beams[0][0]


def test_beam_search_equals_naive_beam_search():
    net = tiny(positions="rope", pad_token_id=1)
    settings = GenerationSettings(max_new_tokens=5, num_beams=3, stop_token_ids=())
    with torch.no_grad():
        expected = [naive_beam_search(net, p, 3, 5) for p in PROMPTS]
    assert generate_ids(net, PROMPTS, settings) == expected
    assert generate_ids(net, PROMPTS, settings, use_cache=False) == expected


def test_beams_as_wide_as_the_tree_find_the_most_likely_sequence():
    net = tiny(vocab_size=8)
    prompt, n = [3, 1, 4], 3
    every = [list(c) for c in itertools.product(range(8), repeat=n)]  # all 512 continuations
    best = max(every, key=lambda new: log_prob(net, prompt, new))
    settings = GenerationSettings(max_new_tokens=n, num_beams=8**2, length_penalty=0.0, stop_token_ids=())
    assert generate_ids(net, [prompt], settings) == [best]


def test_beam_search_beats_greedy():
    net = tiny()
    settings = GenerationSettings(max_new_tokens=8, num_beams=4, length_penalty=0.0, stop_token_ids=())
    greedy = generate_ids(net, PROMPTS, GREEDY)
    beams = generate_ids(net, PROMPTS, settings)
    for prompt, g, b in zip(PROMPTS, greedy, beams, strict=True):
        assert log_prob(net, prompt, b) >= log_prob(net, prompt, g) - 1e-5
    assert beams != greedy  # the search found something greedy did not


@pytest.mark.parametrize("positions", ["rope", "alibi"])
def test_beam_search_cached_uncached_and_padding(positions):
    net = tiny(positions=positions, pad_token_id=1)
    stop = (naive_greedy(net, PROMPTS[1], 8)[2],)
    for early_stopping in (False, True, "never"):
        settings = GenerationSettings(
            max_new_tokens=7, num_beams=3, stop_token_ids=stop, early_stopping=early_stopping
        )
        batch = generate_ids(net, PROMPTS, settings)
        assert batch == generate_ids(net, PROMPTS, settings, use_cache=False)
        assert batch == [generate_ids(net, [p], settings)[0] for p in PROMPTS]
        assert any(row[-1] in stop for row in batch)


# ---------------------------------------------------------------------------------------
# errors a learner can act on


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(max_new_tokens=-1), "max_new_tokens=-1 must be an integer >= 0"),
        (dict(max_new_tokens=2.5), "max_new_tokens=2.5 must be an integer"),
        (dict(min_new_tokens=-1), "min_new_tokens=-1 must be an integer >= 0"),
        (dict(max_new_tokens=4, min_new_tokens=5), r"min_new_tokens=5 must lie in \[0, max_new_tokens=4\]"),
        (dict(temperature=-0.1), "temperature=-0.1 must be >= 0"),
        (dict(temperature=float("nan")), "temperature=nan must be >= 0"),
        (dict(top_k=0), "top_k=0 must be an integer >= 1"),
        (dict(top_p=0.0), r"top_p=0.0 must lie in \(0, 1\]"),
        (dict(top_p=1.2), r"top_p=1.2 must lie in \(0, 1\]"),
        (dict(repetition_penalty=0.0), "repetition_penalty=0.0 must be > 0"),
        (dict(num_beams=0), "num_beams=0 must be an integer >= 1"),
        (dict(early_stopping="sometimes"), "early_stopping='sometimes'; allowed values"),
        (dict(stop_token_ids=(-1,)), "stop_token_ids=-1 must be an integer >= 0"),
        (dict(seed=-3), "seed=-3 must be an integer >= 0"),
        (dict(num_beams=2, temperature=0.7), "beam sampling is not supported"),
        (dict(num_beams=2, top_k=5), "beam sampling is not supported"),
        (dict(num_beams=2, top_p=0.9), "beam sampling is not supported"),
    ],
)
def test_settings_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        GenerationSettings(**kwargs)


def test_settings_accept_a_single_stop_id_and_beams_with_default_temperature():
    assert GenerationSettings(stop_token_ids=5).stop_token_ids == (5,)
    assert not GenerationSettings(num_beams=3).do_sample


def test_generation_errors():
    net = tiny()
    settings = GenerationSettings(max_new_tokens=4)
    cases = [
        (lambda: generate_ids(tiny(family="encoder"), PROMPTS, settings), "cannot generate with a 'encoder'"),
        (lambda: generate_ids(net, [[1, 2], []], settings), "prompt 1 is empty"),
        (lambda: generate_ids(net, [[1, V]], settings), f"prompt 0 holds {V}, not a token id"),
        (lambda: generate_ids(net, [[1, 2.5]], settings), "prompt 0 holds 2.5, not a token id"),
        (lambda: generate_ids(net, [], settings), "holds no prompt"),
        (lambda: generate_ids(net, [1, 2, 3], settings), "list of token-id lists"),
        (lambda: generate_ids(net, torch.tensor([1, 2]), settings), r"shape \(batch, seq_len\)"),
        (lambda: generate_ids(net, [[1, 2]], settings, attention_mask=[[1]]), "same shape as input_ids"),
        (
            lambda: generate_ids(net, [[1, 2]], GenerationSettings(stop_token_ids=(V,))),
            f"stop token id {V} is out of range",
        ),
        (
            lambda: generate_ids(net, [[1] * 70], GenerationSettings(max_new_tokens=10)),
            "a prompt of 70 tokens is longer than max_seq_len=64",
        ),
        (lambda: list(stream_ids(net, PROMPTS, settings)), "streams one prompt, got a batch of 3"),
        (lambda: stream_ids(net, [1, 2], GenerationSettings(num_beams=2)), "cannot stream beam search"),
        (
            lambda: generate_ids(tiny_seq2seq(decoder_start_token_id=None), PROMPTS, settings),
            "needs a first decoder token",
        ),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()


def test_learned_positions_generate_past_max_seq_len_with_a_sliding_context():
    """nanoGPT's crop: past max_seq_len the model sees only the last max_seq_len tokens."""
    net = tiny(positions="learned", max_seq_len=8)
    prompt = [1, 2, 3]
    ours = generate_ids(net, [prompt], GenerationSettings(max_new_tokens=12, min_new_tokens=12, greedy=True))[
        0
    ]
    sequence = list(prompt)
    with torch.no_grad():
        for _ in range(12):
            window = torch.tensor([sequence[-8:]])
            sequence.append(int(net(window)[0, -1].argmax()))
    assert ours == sequence[3:]


def test_facade_defaults_mean_not_set():
    """None means "not set": sampling takes 0.8 / 0.95, beam search neither; a value the
    user passes is never changed (0.8 with beams is an error, not silently 1.0)."""
    from glassformer.sampling import generation_settings

    sampled = generation_settings()
    assert (sampled.temperature, sampled.top_p) == (0.8, 0.95)
    beams = generation_settings(num_beams=2)
    assert (beams.temperature, beams.top_p) == (1.0, None)
    with pytest.raises(ValueError, match="beam sampling is not supported"):
        generation_settings(temperature=0.8, num_beams=2)
    with pytest.raises(ValueError, match="beam sampling is not supported"):
        generation_settings(top_p=0.95, num_beams=2)
    assert generation_settings(temperature=0.3, top_p=1.0).top_p == 1.0


def test_last_only_logits_are_the_last_position_of_all():
    """Generation asks the head for the last position alone (a prompt's t x v scores skipped)."""
    net = tiny()
    ids = torch.randint(0, net.config.vocab_size, (2, 7))
    with torch.no_grad():
        last, every = net(ids, last_only=True), net(ids)
    assert last.shape == (2, 1, net.config.vocab_size)
    torch.testing.assert_close(last, every[:, -1:], atol=1e-5, rtol=1e-5)  # one row's product: a GEMV
