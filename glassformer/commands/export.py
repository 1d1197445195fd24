"""``glassformer export MODEL OUT_DIR``: write a model as a Hugging Face checkpoint directory."""

from __future__ import annotations

import argparse

from glassformer.commands.arguments import HUB_ID_HELP


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "export",
        help="write a model as a Hugging Face checkpoint directory",
        description="Write MODEL as a Hugging Face checkpoint directory (config.json, model.safetensors "
        "and, for a byte-level BPE or WordPiece tokenizer, tokenizer.json) that transformers' "
        "from_pretrained loads, as the first Hugging Face family that holds it (GPT-2, Llama, Mistral, "
        "Qwen, Gemma, OLMo 2, Phi, OPT, GPT-NeoX, BERT, RoBERTa, DistilBERT, ViT, T5, Marian, BART). "
        "The config is checked by reading it back with the importer; a model no Hugging Face family "
        "holds exactly (e.g. ALiBi positions) is refused, naming the fields that differ.",
    )
    parser.add_argument(
        "model",
        help="a registry name, a .gguf file, a Hugging Face checkpoint directory, a run directory, "
        + HUB_ID_HELP,
    )
    parser.add_argument("out_dir", help="the directory to write (created; must be empty or absent)")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an earlier checkpoint in OUT_DIR (refused, naming them, if it holds any other files)",
    )
    parser.add_argument(
        "--model-type",
        help="write this Hugging Face model_type (e.g. roberta, opt), where the first that holds the model "
        "would be another computing the same (bert, gpt2)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from glassformer.loading import load

    done = load(args.model).save_hf(args.out_dir, overwrite=args.overwrite, model_type=args.model_type)
    print(f"wrote {done.directory}: a Hugging Face {done.architecture} checkpoint ({done.model_type!r})")
    for name in done.files:
        print(f"  {name:<24} {(done.directory / name).stat().st_size:>12,} bytes")
    for note in done.notes:
        print(f"note: {note}")
    return 0
