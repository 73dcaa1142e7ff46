#!/usr/bin/env bash
# Re-vendor the Vega-Lite bundles that the HTML report inlines (nsyswrap/render/vendor/).
#   bash scripts/vendor_vega.sh
# Takes the packages from the npm registry with `npm pack` (pinned versions below, checked
# against the registry's integrity hashes by npm), keeps their minified UMD builds without
# the source-map comment (a page opened from disk must not ask for anything) and their
# licences (BSD-3-Clause).
set -euo pipefail
cd "$(dirname "$0")/.."
VEGA=6.4.0
VEGA_LITE=6.5.0
VEGA_EMBED=7.3.0
dest=nsyswrap/render/vendor
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$dest"
for spec in "vega@$VEGA:vega.min.js" "vega-lite@$VEGA_LITE:vega-lite.min.js" \
            "vega-embed@$VEGA_EMBED:vega-embed.min.js"; do
  pkg=${spec%%:*}
  file=${spec##*:}
  name=${pkg%@*}
  (cd "$work" && npm pack --silent "$pkg" >/dev/null)
  mkdir -p "$work/$name"
  tar xzf "$work/$name"-*.tgz -C "$work/$name"
  sed '/^\/\/# sourceMappingURL=/d' "$work/$name/package/build/$file" > "$dest/$file"
  cp "$work/$name/package/LICENSE" "$dest/LICENSE.$name"
  if grep -qi '</script' "$dest/$file"; then
    echo "vendor_vega.sh: $file contains '</script': it cannot be inlined as is" >&2
    exit 1
  fi
done
cat > "$dest/VERSIONS" <<VERSIONS
vega $VEGA
vega-lite $VEGA_LITE
vega-embed $VEGA_EMBED
VERSIONS
echo "vendored into $dest: $(cat "$dest/VERSIONS" | tr '\n' ' ')"
