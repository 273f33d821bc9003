#!/usr/bin/env bash
# Builds the Debian package of the appliance with dpkg-deb: build/deb/lia_<version>_<arch>.deb.
#
# It installs the files npm would publish (package.json "files": bin/, dist/, config/, the web
# page, systemd/, docs/) and the production dependencies under /usr/lib/lia, a `lia` command in
# /usr/bin, the systemd units, the polkit rule, the D-Bus policy, sysusers/tmpfiles entries, the
# avahi service file, llama.cpp's llama-server built from the bundled source (/usr/lib/lia/llama-server)
# and a configuration file /etc/lia/lia.config.yaml (a conffile). It creates the
# user `lia` on install and starts nothing; a purge removes the user and /var/lib/lia.
#
# Node.js is not bundled and not a hard dependency: the appliance needs Node 20.11 or later, which
# Debian 12 does not ship (NodeSource's `nodejs` package, a tarball in /usr/local or nvm all do), so
# the package only recommends `nodejs` and `lia` runs the `node` on PATH (or $LIA_NODE).
#
# Run `npm run package:deb` (builds dist/ first). Environment: LIA_DEB_OUT (output folder, default
# build/deb), LIA_DEB_COMPRESSION (dpkg-deb's -Z: zstd by default; none is fastest).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
[ -f dist/core/cli/main.js ] || { echo "package:deb: dist/ is missing; run npm run build first" >&2; exit 1; }
command -v dpkg-deb >/dev/null || { echo "package:deb: dpkg-deb is missing (Debian package dpkg)" >&2; exit 1; }

version="$(node -p 'require("./package.json").version')"
arch="$(dpkg --print-architecture)"
out="${LIA_DEB_OUT:-$root/build/deb}"
compression="${LIA_DEB_COMPRESSION:-zstd}"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
pkg="$stage/lia"
app="$pkg/usr/lib/lia"
mkdir -p "$app" "$out"

# The published files, exactly as `npm pack` selects them.
npm pack --dry-run --json --ignore-scripts 2>/dev/null \
  | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{for(const f of JSON.parse(s)[0].files)console.log(f.path)})' \
  > "$stage/files"
echo package.json >> "$stage/files"
tar -C "$root" -cf - -T "$stage/files" | tar -C "$app" -xf -

# Production dependencies: the lock file's packages that are not dev-only and are installed. A
# top-level folder brings its nested node_modules along. -h follows a node_modules symlink.
node -e '
  const lock = require("./package-lock.json"); const fs = require("node:fs");
  for (const [p, v] of Object.entries(lock.packages)) {
    if (!p || v.dev || v.devOptional || p.split("node_modules/").length !== 2 || !fs.existsSync(p)) continue;
    console.log(p);
  }' > "$stage/deps"
tar -C "$root" -chf - -T "$stage/deps" | tar -C "$app" -xf -
# Native builds for other systems and processors are dead weight here.
node_arch=$([ "$arch" = amd64 ] && echo x64 || echo "$arch")
for d in "$app"/node_modules/onnxruntime-node/bin/napi-v*; do
  [ -d "$d" ] || continue
  rm -rf "$d/darwin" "$d/win32"
  find "$d/linux" -mindepth 1 -maxdepth 1 ! -name "$node_arch" -exec rm -rf {} +
done

# llama.cpp's llama-server of the bundled release (backend-llama-server: vision models, rerankers,
# and text where `backends` gives it), so the package needs no build on the appliance: the binary,
# its libraries (found through $ORIGIN) and the build's stamp, in /usr/lib/lia/llama-server. Built
# once per release by `lia engine build` (cached in ~/.cache/lia; tens of minutes the first time).
node bin/lia.js engine build >&2
engine="$(node bin/lia.js engine build --check)"
mkdir -p "$app/llama-server"
cp -a "$(dirname "$engine")"/. "$app/llama-server/"
cp "$(dirname "$(dirname "$(dirname "$engine")")")/stamp" "$app/llama-server/stamp"

# The command: a wrapper that finds Node and the packaged configuration.
mkdir -p "$pkg/usr/bin"
cat > "$app/bin/lia" <<'WRAPPER'
#!/bin/sh
# lia: the appliance's command, run with the Node.js on PATH (20.11 or later) or $LIA_NODE.
node="${LIA_NODE:-$(command -v node || true)}"
if [ -z "$node" ]; then
  echo "lia: Node.js 20.11 or later is needed: install it (NodeSource's nodejs package, or a tarball in /usr/local) or set LIA_NODE" >&2
  exit 127
fi
if [ -z "${LIA_CONFIG:-}" ] && [ -r /etc/lia/lia.config.yaml ]; then
  LIA_CONFIG=/etc/lia/lia.config.yaml
  export LIA_CONFIG
fi
exec "$node" /usr/lib/lia/bin/lia.js "$@"
WRAPPER
chmod 0755 "$app/bin/lia" "$app/bin/lia.js"
ln -s ../lib/lia/bin/lia "$pkg/usr/bin/lia"

# systemd, polkit, D-Bus, avahi, as systemd/README.md maps them.
install -D -m 0644 -t "$pkg/usr/lib/systemd/system" systemd/*.service systemd/*.target
install -D -m 0644 -t "$pkg/usr/share/polkit-1/rules.d" systemd/polkit-1/rules.d/*
install -D -m 0644 -t "$pkg/usr/share/dbus-1/system.d" systemd/dbus-1/system.d/*
install -D -m 0644 systemd/sysusers.d/lia.conf "$pkg/usr/lib/sysusers.d/lia.conf"
install -D -m 0644 systemd/tmpfiles.d/lia.conf "$pkg/usr/lib/tmpfiles.d/lia.conf"
install -D -m 0644 systemd/avahi/services/lia.service "$pkg/etc/avahi/services/lia.service"
install -D -m 0644 packaging/deb/lia.config.yaml "$pkg/etc/lia/lia.config.yaml"
install -D -m 0644 -t "$pkg/usr/share/doc/lia" README.md docs/*.md
install -D -m 0644 packaging/deb/copyright "$pkg/usr/share/doc/lia/copyright"

mkdir -p "$pkg/DEBIAN"
install -m 0755 packaging/deb/postinst packaging/deb/prerm packaging/deb/postrm "$pkg/DEBIAN/"
printf '%s\n' /etc/lia/lia.config.yaml /etc/avahi/services/lia.service > "$pkg/DEBIAN/conffiles"
cat > "$pkg/DEBIAN/control" <<CONTROL
Package: lia
Version: $version
Architecture: $arch
Maintainer: LIA maintainers <lia@localhost>
Installed-Size: $(du -sk "$pkg/usr" "$pkg/etc" | awk '{s+=$1} END {print s}')
Depends: adduser
Recommends: nodejs (>= 20.11), ffmpeg
Section: net
Priority: optional
Homepage: https://localhost/lia
Description: Local Inference Appliance
 Serves local language models over HTTPS with Ollama- and OpenAI-compatible
 APIs, a local certificate authority and API keys, run by systemd as the
 unprivileged user lia. Needs Node.js 20.11 or later on PATH.
CONTROL

deb="$out/lia_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Z"$compression" --build "$pkg" "$deb" >/dev/null
echo "$deb"
