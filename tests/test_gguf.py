"""GGUF loading on every supported storage type, and malformed checkpoints that must fail clearly.

A tiny random Llama (d=256 so that K-quant super-blocks of 256 fit a row, f=512, 4 heads of
64, 2 kv heads, 2 layers, a 262-token byte-level BPE) is written to GGUF the way llama.cpp's
converter writes it, once per storage type; Hugging Face transformers reading the same file
is the reference. Every broken input (GGUF, safetensors, pickle, config.json) must raise
ValueError or FileNotFoundError naming the problem, within seconds.
"""

from __future__ import annotations

import json
import shutil
import signal
import struct
from contextlib import contextmanager
from pathlib import Path

import gguf
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from glassformer.formats.gguf import SUPPORTED_STORAGE, load_gguf, unpermute_rope_rows
from glassformer.formats.hf import read_hf_checkpoint
from glassformer.loading import load
from glassformer.tokenizers.byte_unicode import bytes_to_unicode

transformers = pytest.importorskip("transformers")

Q = gguf.GGMLQuantizationType
D_MODEL, D_FF, N_LAYERS, N_HEADS, N_KV_HEADS, D_HEAD = 256, 512, 2, 4, 2, 64
MERGES = ["Ġ t", "h e", "Ġt he", "a t", "Ġ c"]
TOKENS = [bytes_to_unicode(bytes([b])) for b in range(256)] + [m.replace(" ", "") for m in MERGES]
TOKENS.append("<|endoftext|>")
TOKEN_TYPES = [1] * (len(TOKENS) - 1) + [3]  # 1 normal, 3 control
EOS = len(TOKENS) - 1
LLAMA_METADATA = {  # under "llama.": what llama.cpp's converter writes for a Llama
    "block_count": N_LAYERS,
    "context_length": 64,
    "embedding_length": D_MODEL,
    "feed_forward_length": D_FF,
    "attention.head_count": N_HEADS,
    "attention.head_count_kv": N_KV_HEADS,
    "attention.layer_norm_rms_epsilon": 1e-5,
    "rope.freq_base": 10000.0,
    "rope.dimension_count": D_HEAD,
    "vocab_size": len(TOKENS),
}
GGUF_NAMES = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight"}
GGUF_NAMES["lm_head.weight"] = "output.weight"
for _i in range(N_LAYERS):
    for _hf, _ggml in [
        ("input_layernorm", "attn_norm"),
        ("self_attn.q_proj", "attn_q"),
        ("self_attn.k_proj", "attn_k"),
        ("self_attn.v_proj", "attn_v"),
        ("self_attn.o_proj", "attn_output"),
        ("post_attention_layernorm", "ffn_norm"),
        ("mlp.gate_proj", "ffn_gate"),
        ("mlp.up_proj", "ffn_up"),
        ("mlp.down_proj", "ffn_down"),
    ]:
        GGUF_NAMES[f"model.layers.{_i}.{_hf}.weight"] = f"blk.{_i}.{_ggml}.weight"
# Types gguf can dequantize but not quantize: byte offsets of the fp16 scales (d, dmin) in one
# block (layouts in gguf/quants.py); the other bytes are small integers, valid at any value.
FP16_SCALES = {
    Q.Q2_K: (80, 82),  # 16 scale/min nibble pairs, 64 bytes of 2-bit q, d, dmin
    Q.Q3_K: (108,),  # 32-byte high-bit mask, 64 bytes of 2-bit q, 12 bytes of 6-bit scales, d
    Q.Q4_K: (0, 2),  # d, dmin, 12 bytes of 6-bit scales and mins, 128 bytes of 4-bit q
    Q.Q5_K: (0, 2),  # as Q4_K plus a 32-byte mask of fifth bits
    Q.Q6_K: (208,),  # 128 bytes of low 4 bits, 64 of high 2 bits, 16 int8 scales, d
    Q.IQ2_XXS: (0,),  # d, then grid indices and signs (a type we refuse)
}
TEXT = "the cat sat on the hat; 42 cats!"


def llama_cpp_permute(weight: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's converter (LlamaModel.permute): per head, rotate-half rows -> pairs (2i, 2i+1)."""
    rows, cols = weight.shape
    return weight.reshape(heads, 2, rows // heads // 2, cols).swapaxes(1, 2).reshape(rows, cols)


def random_blocks(shape: tuple[int, int], storage: Q, rng: np.random.Generator) -> np.ndarray:
    """Valid raw blocks of ``storage`` for a (rows, cols) matrix: random integer parts, fp16
    scales set to finite values scaled so that the weights have a standard deviation of 0.02."""
    block, size = gguf.GGML_QUANT_SIZES[storage]
    raw = rng.integers(0, 256, (shape[0], shape[1] // block, size), dtype=np.uint8)
    scales = [raw[..., at : at + 2].view(np.float16) for at in FP16_SCALES[storage]]
    for scale in scales:
        scale[...] = rng.uniform(0.5, 1.0, scale.shape)
    shrink = 0.02 / gguf.quants.dequantize(raw.reshape(shape[0], -1), storage).std()
    for scale in scales:
        scale *= shrink
    return raw.reshape(shape[0], -1)


def encode(weight: np.ndarray, storage: Q, rng: np.random.Generator) -> tuple[np.ndarray, Q | None]:
    """(array for GGUFWriter.add_tensor, raw_dtype)."""
    if storage == Q.F32:
        return weight.astype(np.float32), None
    if storage == Q.F16:
        return weight.astype(np.float16), None
    if storage in FP16_SCALES:
        return random_blocks(weight.shape, storage, rng), storage
    return gguf.quants.quantize(weight, storage), storage


def write_llama_gguf(
    model,
    path: Path,
    storage: Q,
    arch: str = "llama",
    metadata: dict | None = None,
    odd: dict | None = None,
    extra: dict | None = None,
) -> Path:
    """Write an HF LlamaForCausalLM as llama.cpp would: metadata, a byte-level BPE tokenizer, Q and K
    rows permuted, matrices stored as ``storage`` (``odd`` gives some tensors another type), norm
    gains as F32. ``metadata`` overrides some of `LLAMA_METADATA`; ``extra``: more F32 tensors."""
    writer = gguf.GGUFWriter(str(path), arch)
    for key, value in {**LLAMA_METADATA, **(metadata or {})}.items():
        add = writer.add_float32 if isinstance(value, float) else writer.add_uint32
        add(f"{arch}.{key}", value)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(TOKENS)
    writer.add_token_types(TOKEN_TYPES)
    writer.add_token_merges(MERGES)
    writer.add_bos_token_id(EOS)
    writer.add_eos_token_id(EOS)
    rng = np.random.default_rng(0)
    state = model.state_dict()
    for theirs, name in GGUF_NAMES.items():
        weight = state[theirs].numpy()
        if name.endswith(("attn_q.weight", "attn_k.weight")):
            weight = llama_cpp_permute(weight, N_HEADS if "attn_q" in name else N_KV_HEADS)
        kind = (odd or {}).get(name, storage) if weight.ndim == 2 else Q.F32
        array, raw_dtype = encode(weight, kind, rng)
        writer.add_tensor(name, array, raw_dtype=raw_dtype)
    for name, array in (extra or {}).items():
        writer.add_tensor(name, array)
    finish(writer)
    return path


def finish(writer: gguf.GGUFWriter) -> None:
    """Write a `gguf.GGUFWriter`'s header, metadata and tensors, and close its file."""
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@contextmanager
def within(seconds: int):
    """Fail (instead of hanging) when the block takes longer than ``seconds``."""

    def expire(signum, frame):
        raise TimeoutError(f"took longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture(scope="module")
def source():
    """The tiny HF Llama every GGUF file here is written from (norm gains random, not all 1)."""
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=len(TOKENS),
        hidden_size=D_MODEL,
        intermediate_size=D_FF,
        num_hidden_layers=N_LAYERS,
        num_attention_heads=N_HEADS,
        num_key_value_heads=N_KV_HEADS,
        max_position_embeddings=64,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        tie_word_embeddings=False,
        bos_token_id=EOS,
        eos_token_id=EOS,
    )
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.uniform_(0.5, 1.5)
    return model


@pytest.fixture(scope="module")
def gguf_file(source, tmp_path_factory):
    """storage type name -> path of the tiny Llama stored that way (written once)."""
    folder = tmp_path_factory.mktemp("gguf")

    def path(storage: str) -> Path:
        target = folder / f"tiny-{storage}.gguf"
        if not target.exists():
            write_llama_gguf(source, target, Q[storage])
        return target

    return path


@pytest.mark.parametrize("storage", SUPPORTED_STORAGE)
def test_logits_match_hf_reading_the_same_file(storage, gguf_file):
    """Both dequantize with `gguf.quants.dequantize` and undo the Q/K permutation; the logits
    agree to float32 rounding, and our weight is exactly the gguf package's dequantization."""
    path = gguf_file(storage)
    ours, tokenizer, _ = load_gguf(path)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32
    ).eval()
    ids = torch.tensor([tokenizer.encode(TEXT)])
    with torch.no_grad():
        logits = ours(ids)
        diff = (logits - theirs(ids).logits).abs().max().item()
    print(f"{storage}: max abs logit difference {diff:.2e} (logits up to {logits.abs().max():.2f})")
    assert diff <= 1e-4
    assert logits.std() > 0.05  # the weights are not all (nearly) zero: the comparison means something

    tensor = next(t for t in gguf.GGUFReader(path).tensors if t.name == "blk.0.attn_k.weight")
    assert tensor.tensor_type.name == storage
    reference = unpermute_rope_rows(
        torch.from_numpy(gguf.quants.dequantize(tensor.data, tensor.tensor_type).copy()), N_KV_HEADS
    )
    k_rows = slice(N_HEADS * D_HEAD, (N_HEADS + N_KV_HEADS) * D_HEAD)  # qkv_proj = [W_Q; W_K; W_V]
    assert torch.equal(ours.stack.blocks[0].attn.qkv_proj.weight[k_rows], reference)


def test_f32_file_gives_back_the_source_weights_and_tokenizer(gguf_file, source):
    """F32 is lossless, so un-permuting must restore HF's Q and K exactly."""
    ours, tokenizer, _ = load_gguf(gguf_file("F32"))
    mine, hf = dict(ours.named_parameters()), dict(source.named_parameters())
    pairs = {"stack.embed.token.weight": "model.embed_tokens.weight", "lm_head.weight": "lm_head.weight"}
    pairs["stack.final_norm.weight"] = "model.norm.weight"
    for i in range(N_LAYERS):
        pairs[f"stack.blocks.{i}.attn.o_proj.weight"] = f"model.layers.{i}.self_attn.o_proj.weight"
        pairs[f"stack.blocks.{i}.ffn.down_proj.weight"] = f"model.layers.{i}.mlp.down_proj.weight"
    for name, theirs in pairs.items():
        assert torch.equal(mine[name], hf[theirs]), name
    for i in range(N_LAYERS):  # q, k and v land in the row blocks of one qkv_proj
        qkv = [hf[f"model.layers.{i}.self_attn.{n}_proj.weight"] for n in "qkv"]
        assert torch.equal(mine[f"stack.blocks.{i}.attn.qkv_proj.weight"], torch.cat(qkv)), i
    assert tokenizer.encode(" the") == [TOKENS.index("Ġthe")]
    assert tokenizer.decode(tokenizer.encode(TEXT)) == TEXT
    assert ours.config.eos_token_id == EOS and not ours.config.tie_embeddings


# --- malformed GGUF ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def q4_file(gguf_file) -> tuple[Path, dict[str, int]]:
    """A valid Q4_0 file and where its sections start."""
    path = gguf_file("Q4_0")
    reader = gguf.GGUFReader(path)
    sections = {
        "metadata": 24,  # after magic, version, tensor count, key/value count
        "tensor info": reader.tensors[0].field.offset,
        "data": reader.data_offset,
    }
    return path, sections


def test_our_header_finds_the_bytes_the_gguf_package_reads(q4_file):
    """`_reader` parses the header itself (tests/test_gguf_header.py: the same metadata); each
    tensor's `StoredTensor` rows are the bytes of the reference reader's tensor, in its layout."""
    from glassformer.formats.gguf import StoredTensor, _reader

    path, _ = q4_file
    ours, theirs = _reader(path), gguf.GGUFReader(str(path))
    assert list(ours.tensors) == [t.name for t in theirs.tensors]
    with open(path, "rb") as handle:
        for tensor in theirs.tensors:
            stored = StoredTensor.of(ours.tensors[tensor.name])
            rows = stored.read_rows(handle, 0, stored.rows)
            assert rows.dtype == tensor.data.dtype and rows.tobytes() == tensor.data.tobytes(), tensor.name
            assert rows.shape[-1] == tensor.data.shape[-1], tensor.name


def test_wrong_magic_is_named(tmp_path, q4_file):
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGML" + q4_file[0].read_bytes()[4:])
    with pytest.raises(ValueError, match="is not a GGUF file"):
        load_gguf(path)
    with pytest.raises(FileNotFoundError, match="no GGUF file"):
        load_gguf(tmp_path / "missing.gguf")


@pytest.mark.parametrize(
    "where, offset",
    [
        ("metadata", -14),  # inside the version / counts header
        ("metadata", -4),
        ("metadata", 1000),  # inside the token list
        ("tensor info", 30),
        ("data", 100),
        ("data", 10**9),  # the last byte missing (clamped below)
    ],
)
def test_truncated_gguf_is_damaged_or_truncated(tmp_path, q4_file, where, offset):
    data, sections = q4_file[0].read_bytes(), q4_file[1]
    end = min(sections[where] + offset, len(data) - 1)
    path = tmp_path / "model.gguf"
    path.write_bytes(data[:end])
    with within(5), pytest.raises(ValueError, match="damaged or truncated GGUF file"):
        load_gguf(path)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("corrupt") / "model.gguf"


@settings(max_examples=30, deadline=None)
@given(changes=st.lists(st.tuples(st.integers(0, 8191), st.integers(0, 255)), min_size=1, max_size=4))
def test_corrupted_bytes_load_or_raise_value_error(q4_file, scratch, changes):
    """Flipped bytes, mostly in the header (metadata, tensor info; the data starts near byte
    5,700): the file loads (garbage weights are still weights) or raises ValueError naming it."""
    data = bytearray(q4_file[0].read_bytes())
    for position, value in changes:
        data[position] = value
    scratch.write_bytes(bytes(data))
    with within(20):
        try:
            load_gguf(scratch)
        except ValueError as error:
            assert str(scratch) in str(error)


def test_unsupported_storage_is_refused_before_any_work(tmp_path, source, monkeypatch):
    """IQ2_XXS (dequantizable by gguf, but not on our list) and a type number gguf does not know."""

    def no_model(*args, **kwargs):
        raise AssertionError("built a model before checking the storage types")

    monkeypatch.setattr("glassformer.formats.gguf.build", no_model)
    path = write_llama_gguf(source, tmp_path / "iq2.gguf", Q.Q8_0, odd={"blk.1.ffn_down.weight": Q.IQ2_XXS})
    with pytest.raises(ValueError, match="tensor blk.1.ffn_down.weight is stored as IQ2_XXS") as error:
        load_gguf(path)
    assert "supported storage types: F32, F16, BF16, Q8_0" in str(error.value)

    field = next(t for t in gguf.GGUFReader(path).tensors if t.name == "blk.1.ffn_down.weight").field
    name_len, name, n_dims, dims, storage, _ = field.parts
    at = field.offset + name_len.nbytes + name.nbytes + n_dims.nbytes + dims.nbytes
    data = bytearray(path.read_bytes())
    assert struct.unpack_from("<I", data, at)[0] == Q.IQ2_XXS
    struct.pack_into("<I", data, at, 99)
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"blk.1.ffn_down.weight is stored as type number 99 \(unknown"):
        load_gguf(path)


def test_unsupported_architecture_is_named(tmp_path, source):
    path = write_llama_gguf(source, tmp_path / "falcon.gguf", Q.F16, arch="falcon")
    with pytest.raises(ValueError, match="GGUF architecture 'falcon' is not supported; supported: llama"):
        load_gguf(path)


@pytest.mark.parametrize("slowest", [1.0, 8.0])
def test_rope_frequency_factors_are_read_as_llama3_scaling(tmp_path, source, slowest):
    """Llama 3.1's rope_freqs.weight: all ones is Llama 3.0's RoPE; the last 4 frequencies slowed
    by 8 is a llama3 scaling whose blending lies between two frequencies (more in
    tests/test_gguf_rope_freqs.py)."""
    factors = np.ones(LLAMA_METADATA["rope.dimension_count"] // 2, dtype=np.float32)
    factors[-4:] = slowest
    path = write_llama_gguf(source, tmp_path / "rope.gguf", Q.F32, extra={"rope_freqs.weight": factors})
    net = load_gguf(path)[0]
    if slowest == 1.0:
        assert net.config.rope_scaling == "none"
    else:
        assert (net.config.rope_scaling, net.config.rope_scaling_factor) == ("llama3", 8.0)
    plain = 1.0 / 10000.0 ** (torch.arange(0, D_HEAD, 2).float() / D_HEAD)
    divided = plain / net.output_stack.rotary.inv_freq
    torch.testing.assert_close(divided, torch.from_numpy(factors), atol=0, rtol=1e-5)


TOO_LARGE = r"|this config makes a model of [\d,]+ parameters .* nothing was built"  # models/size.py


@pytest.mark.parametrize(
    "metadata, message",
    [
        ({"block_count": 10**9}, "the metadata says 1000000000 blocks, the file holds tensors for 2"),
        (
            {"embedding_length": 2**20},
            r"token_embd.weight has shape \(262, 256\), our 'stack.embed.token.weight' needs" + TOO_LARGE,
        ),
        ({"feed_forward_length": 2**30}, r"blk.0.ffn_gate.weight has shape \(512, 256\)" + TOO_LARGE),
    ],
)
def test_metadata_that_contradicts_the_tensors_fails_before_allocating(tmp_path, source, metadata, message):
    """A corrupted size must not make us build (or loop over) a model of that size."""
    path = write_llama_gguf(source, tmp_path / "lying.gguf", Q.Q8_0, metadata=metadata)
    with within(5), pytest.raises(ValueError, match=message):
        load_gguf(path)


# --- malformed Hugging Face checkpoint directories -------------------------------------------


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory) -> Path:
    """A tiny GPT-2 checkpoint directory (config.json + model.safetensors)."""
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64, n_positions=32)
    folder = tmp_path_factory.mktemp("hf") / "gpt2"
    transformers.GPT2LMHeadModel(config).save_pretrained(folder)
    assert load(folder).net.config.d_model == 32  # the intact directory loads
    return folder


def broken_copy(gpt2_dir: Path, tmp_path: Path, name: str, content: bytes | str) -> Path:
    """A copy of the GPT-2 directory with file ``name`` replaced by ``content``."""
    folder = tmp_path / "checkpoint"
    shutil.copytree(gpt2_dir, folder)
    target = folder / name
    target.write_bytes(content) if isinstance(content, bytes) else target.write_text(content)
    return folder


SAFETENSORS_DAMAGE = {  # name: ((file bytes, header length) -> damaged bytes, what the error says)
    "truncated": (lambda data, n: data[: len(data) // 2], "model.safetensors is truncated: tensor"),
    "truncated in the header": (lambda data, n: data[: 8 + n // 2], r"model.safetensors .*header claims"),
    "garbage JSON header": (
        lambda data, n: data[:8] + b"{" + b"x" * (n - 1) + data[8 + n :],
        "model.safetensors: the safetensors header is not valid JSON",
    ),
    "header length past the end": (
        lambda data, n: struct.pack("<Q", 10 * len(data)) + data[8:],
        "model.safetensors is a damaged or truncated safetensors file: its header claims",
    ),
}


@pytest.mark.parametrize("damage", SAFETENSORS_DAMAGE)
def test_damaged_safetensors_are_named(gpt2_dir, tmp_path, damage):
    data = (gpt2_dir / "model.safetensors").read_bytes()
    corrupt, message = SAFETENSORS_DAMAGE[damage]
    header_length = struct.unpack("<Q", data[:8])[0]
    folder = broken_copy(gpt2_dir, tmp_path, "model.safetensors", corrupt(data, header_length))
    with within(5), pytest.raises(ValueError, match=message):
        load(folder)


class Payload:
    """Unpickling this calls open(marker, "w"): harmless, but it creates the marker file."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture(params=["zip", "legacy"])
def pickle_dir(request, gpt2_dir, tmp_path) -> tuple[Path, dict[str, torch.Tensor], bool]:
    """(directory with pytorch_model.bin instead of safetensors, its state, legacy format?)"""
    from safetensors.torch import load_file

    folder = tmp_path / "checkpoint"
    shutil.copytree(gpt2_dir, folder)
    state = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    return folder, state, request.param == "legacy"


def test_pickle_that_would_run_code_is_refused(pickle_dir):
    folder, state, legacy = pickle_dir
    marker = folder / "marker"
    weights = folder / "pytorch_model.bin"
    torch.save({**state, "extra": Payload(str(marker))}, weights, _use_new_zipfile_serialization=not legacy)
    with pytest.raises(ValueError, match="pytorch_model.bin holds more than tensors") as error:
        load(folder)
    assert "GLOBAL io.open" in str(error.value)
    assert not marker.exists()
    torch.load(weights, weights_only=False)  # the payload is live: plain unpickling runs it
    assert marker.exists()


def test_truncated_pickle_is_damaged(pickle_dir):
    folder, state, legacy = pickle_dir
    weights = folder / "pytorch_model.bin"
    torch.save(state, weights, _use_new_zipfile_serialization=not legacy)
    assert load(folder).net.config.d_model == 32
    data = weights.read_bytes()
    for end in [0, 10, 100, 300, 1000, len(data) // 2, len(data) - 1]:
        weights.write_bytes(data[:end])
        with (
            within(5),
            pytest.raises(ValueError, match="pytorch_model.bin is a damaged or truncated PyTorch"),
        ):
            load(folder)


def test_unsupported_model_type_lists_the_supported(gpt2_dir, tmp_path):
    config = json.loads((gpt2_dir / "config.json").read_text())
    folder = broken_copy(gpt2_dir, tmp_path, "config.json", json.dumps({**config, "model_type": "falcon"}))
    with pytest.raises(
        ValueError, match="model_type 'falcon' is not supported; supported: .*bert, .*gpt2, .*llama"
    ):
        load(folder)


def test_config_that_is_not_json_is_named(gpt2_dir, tmp_path):
    folder = broken_copy(gpt2_dir, tmp_path, "config.json", '{"model_type": "gpt2",')
    with pytest.raises(ValueError, match="config.json is not valid JSON"):
        read_hf_checkpoint(folder)
    with pytest.raises(ValueError, match="config.json is not valid JSON"):  # through gf.load too
        load(folder)
