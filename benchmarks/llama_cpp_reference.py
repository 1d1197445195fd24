"""llama.cpp as the reference beside our decoders: GGUF files re-made in another tensor type from
the same weights, and greedy runs of llama.cpp on them (`pretrained_speed`, `quant_quality`).

llama.cpp comes from llama-cpp-python, a benchmark-only dependency with no binary wheel on
PyPI: ``pip install '.[bench]'`` builds it (CMake and a C++ compiler; about 10 minutes on 2
cores). Without it, `greedy_runner` says so and the benchmarks run the rest.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import torch

# The tensor types these benchmarks write, by our names (block_quant's kinds, and float32).
TENSOR_TYPES = {"float32": "F32", "q8_0": "Q8_0", "q4_0": "Q4_0", "q4_1": "Q4_1"}


def write_gguf_as(source: Path, target: Path, kind: str) -> None:
    """``source`` with every quantized tensor re-made as ``kind`` ("float32" or a block kind) by
    gguf.quants, llama.cpp's reference quantizer, from the floats the file's blocks stand for;
    F32 and F16 tensors (the norms) and the metadata copied as they are."""
    import gguf

    types = gguf.GGMLQuantizationType
    target_type = types[TENSOR_TYPES[kind]]
    reader = gguf.GGUFReader(str(source))
    writer = gguf.GGUFWriter(str(target), arch=str(reader.fields["general.architecture"].contents()))
    for field in reader.fields.values():
        if field.name == "general.architecture" or field.name.startswith("GGUF."):
            continue
        sub_type = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), field.types[0], sub_type=sub_type)
    for tensor in reader.tensors:
        if tensor.tensor_type in (types.F32, types.F16):
            writer.add_tensor(tensor.name, tensor.data, raw_dtype=tensor.tensor_type)
            continue
        values = gguf.quants.dequantize(tensor.data, tensor.tensor_type)  # the file's floats
        writer.add_tensor(tensor.name, gguf.quants.quantize(values, target_type), raw_dtype=target_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def greedy_runner(path: Path, context: int = 512):
    """(``run(prompt, n, stop_ids)``: llama.cpp's greedy tokens after ``prompt`` on ``path``, at
    most ``n``, up to and including the first of ``stop_ids``; its load seconds), or
    (None, why) where llama-cpp-python is missing."""
    try:
        import llama_cpp
    except ImportError:
        return None, "llama-cpp-python is not installed (pip install '.[bench]': it builds llama.cpp)"
    start = time.perf_counter()
    threads = torch.get_num_threads()
    llm = llama_cpp.Llama(model_path=str(path), n_threads=threads, n_ctx=context, verbose=False)
    loaded = time.perf_counter() - start

    def run(prompt: Sequence[int], n: int, stop_ids: Sequence[int] = ()) -> list[int]:
        tokens = []
        for token in llm.generate(list(prompt), top_k=1, temp=0.0, reset=True):
            tokens.append(token)
            if len(tokens) == n or token in stop_ids:
                break
        return tokens

    return run, loaded
