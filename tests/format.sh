#!/bin/sh
# Formatting (DEVELOPERS.md): every C file of the project as clang-format (Debian 12's, 14)
# writes it with the repository's .clang-format. Fix with: clang-format -i FILE...
# A missing clang-format skips (77), except under CI=true, where it fails.
src=${1:-.}
if ! command -v clang-format > /dev/null 2>&1; then
	echo "format: clang-format is not installed (apt-get install clang-format)" >&2
	[ "${CI:-}" = true ] && exit 1
	exit 77
fi
cd "$src" || exit 1
files=$(find server agent cli common include tests bench -name '*.[ch]' -not -path 'tests/fuzz/corpus/*' -not -path 'bench/out/*' | sort)
out=$(clang-format --dry-run --Werror $files 2>&1)
if [ -n "$out" ]; then
	printf '%s\n' "$out" | grep -E '^[^ ].*: (error|warning):' | cut -d: -f1 | sort -u |
		sed 's/^/format: not clang-formatted: /' >&2
	echo "format: run clang-format -i on the files above" >&2
	exit 1
fi
echo "format: $(echo "$files" | wc -l) files clean"
