#!/usr/bin/env bash
# KaTeX for the workshop's equations, vendored from its npm package at a pinned version:
#   katex@0.16.47 (MIT)  dist/katex.mjs, dist/katex.min.css, dist/fonts/*.woff2, LICENSE
# into glassformer/workshop/static/vendor/katex/, shipped as package data: the page never
# asks the network for it. The tarball must match the sha512 pinned here (npm's
# dist.integrity for this version); a mismatch stops before anything is copied.
#
# To move to another version: change VERSION and INTEGRITY (`npm view katex@X dist.integrity`),
# rerun, run tests/test_workshop_katex.py, and update the README.md this writes.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=0.16.47
INTEGRITY=sha512-Eeo8Ys1doU1z+x8AZsPpQu+p/QcZBI5PeOo7QGQdy2x2m0MU/hYagBbGOmXwr5KVbEfVuWv9LpnQWeehogurjg==
DEST=glassformer/workshop/static/vendor/katex

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tarball=$(cd "$work" && npm pack --silent "katex@$VERSION" | tail -n 1)
actual="sha512-$(openssl dgst -sha512 -binary "$work/$tarball" | openssl base64 -A)"
if [ "$actual" != "$INTEGRITY" ]; then
  echo "katex@$VERSION: integrity $actual, expected $INTEGRITY" >&2
  exit 1
fi
tar xzf "$work/$tarball" -C "$work"
src="$work/package"

# Only what the page loads: the ES module, the stylesheet, the woff2 fonts (the stylesheet
# lists woff2 first; browsers that read woff2 never ask for its woff / ttf fallbacks).
rm -rf "$DEST"
mkdir -p "$DEST/fonts"
cp "$src/LICENSE" "$src/dist/katex.mjs" "$src/dist/katex.min.css" "$DEST/"
cp "$src"/dist/fonts/*.woff2 "$DEST/fonts/"

cat >"$DEST/README.md" <<EOF
# KaTeX $VERSION (vendored)

The workshop typesets its equations with [KaTeX](https://katex.org), MIT licensed (see
LICENSE). These files are copied unchanged from the npm package \`katex@$VERSION\`:

- \`katex.mjs\` (dist/katex.mjs, the ES module the page imports)
- \`katex.min.css\` (dist/katex.min.css)
- \`fonts/*.woff2\` (dist/fonts; the woff and ttf fallbacks the stylesheet also names are
  left out: every browser the workshop supports reads woff2, which the stylesheet lists first)
- \`LICENSE\`

Tarball integrity: \`$INTEGRITY\`

Made by \`scripts/vendor_katex.sh\`, which checks that hash before copying; rerun it
to reproduce or to change the version.
EOF
echo "katex@$VERSION in $DEST"
