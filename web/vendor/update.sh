#!/bin/sh
# web/vendor/update.sh - the vendored xterm.js: its built files, taken from the npm registry and
# checked against the integrity (sha512) that package-lock.json pins.
#
#   update.sh                    check: download the locked package, verify its integrity, and
#                                compare it with the files here and SHA256SUMS (exit 1 on a
#                                difference)
#   update.sh --refresh [VER]    lock @xterm/xterm VER (default: npm's latest) in package.json and
#                                package-lock.json, then copy its files here and write SHA256SUMS
#
# Needs node, npm and the registry (this script only; building rackpilotd needs none of them:
# the files here are compiled in by cmake/embed_web.cmake). Nothing is installed into the tree.
#   lib/xterm.mjs -> xterm.mjs   (the ES module build; the view is ES modules, no globals)
#   css/xterm.css -> xterm.css
#   LICENSE       -> xterm.LICENSE.txt
set -eu

HERE=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
PKG=@xterm/xterm
T=$(mktemp -d "${TMPDIR:-/tmp}/rp-vendor.XXXXXX")
trap 'rm -rf "$T"' EXIT
for t in node npm; do command -v "$t" > /dev/null || { echo "update.sh: needs $t" >&2; exit 2; }; done

mode=check
case "${1:-}" in
--refresh) mode=refresh ;;
'') ;;
*) echo "usage: update.sh [--refresh [VERSION]]" >&2; exit 2 ;;
esac

if [ "$mode" = refresh ]; then
	ver=${2:-$(npm view "$PKG" dist-tags.latest)}
	cp "$HERE/package.json" "$T/"
	node -e 'const fs=require("fs"),f=process.argv[1],p=JSON.parse(fs.readFileSync(f));
		p.dependencies[process.argv[2]]=process.argv[3];fs.writeFileSync(f,JSON.stringify(p,null,2)+"\n")' \
		"$T/package.json" "$PKG" "$ver"
	(cd "$T" && npm install --package-lock-only --ignore-scripts --no-audit --no-fund --loglevel=error > /dev/null)
	cp "$T/package.json" "$T/package-lock.json" "$HERE/"
	rm -f "$T/package.json" "$T/package-lock.json"
fi

# The locked version and integrity.
set -- $(node -e 'const l=require(process.argv[1]).packages["node_modules/"+process.argv[2]];
	if(!l||!l.version||!/^sha512-/.test(l.integrity||"")){console.error("package-lock.json locks no "+process.argv[2]+" with a sha512 integrity");process.exit(1)}
	console.log(l.version,l.integrity)' "$HERE/package-lock.json" "$PKG")
ver=$1
want=$2

# The tarball, verified against the lock before anything in it is used.
(cd "$T" && npm pack "$PKG@$ver" --pack-destination "$T" --silent > /dev/null)
tgz=$(ls "$T"/*.tgz)
got=sha512-$(node -e 'process.stdout.write(require("crypto").createHash("sha512").update(require("fs").readFileSync(process.argv[1])).digest("base64"))' "$tgz")
if [ "$got" != "$want" ]; then
	echo "update.sh: $PKG@$ver from the registry is $got; package-lock.json says $want" >&2
	exit 1
fi
mkdir "$T/x"
tar -xzf "$tgz" -C "$T/x"

# What goes where, and the sums of the files as they are here.
mkdir "$T/v"
cp "$T/x/package/lib/xterm.mjs" "$T/v/xterm.mjs"
cp "$T/x/package/css/xterm.css" "$T/v/xterm.css"
cp "$T/x/package/LICENSE" "$T/v/xterm.LICENSE.txt"
(cd "$T/v" && { echo "# $PKG@$ver $want"; sha256sum xterm.mjs xterm.css xterm.LICENSE.txt; }) > "$T/SHA256SUMS"

if [ "$mode" = refresh ]; then
	cp "$T/v/xterm.mjs" "$T/v/xterm.css" "$T/v/xterm.LICENSE.txt" "$T/SHA256SUMS" "$HERE/"
	echo "web/vendor: $PKG@$ver ($want)"
	exit 0
fi
bad=0
for f in xterm.mjs xterm.css xterm.LICENSE.txt SHA256SUMS; do
	if ! cmp -s "$T/v/$f" "$HERE/$f" 2> /dev/null && ! cmp -s "$T/$f" "$HERE/$f" 2> /dev/null; then
		echo "update.sh: web/vendor/$f is not the one in $PKG@$ver" >&2
		bad=1
	fi
done
[ "$bad" = 0 ] || exit 1
echo "web/vendor: $PKG@$ver matches package-lock.json ($want)"
