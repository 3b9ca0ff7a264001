#!/usr/bin/env bash
# make spec-breaking: fail when docs/openapi.json has a breaking change
# (oasdiff's ERR level: a removed operation, a new required request member,
# a response member that may now be missing, …) that docs/BREAKING-ALLOWED
# does not list. CONTRIBUTING.md says how to mark one as intended.
#
# The base is, in order: $SPEC_BASE (any git revision), the newest release
# tag (v*), the merge base of HEAD with main (origin/main, else main), or
# HEAD~1 when HEAD is main itself. Without git history to compare with (no
# git, a shallow clone, a base without the spec) it says so and passes.
set -euo pipefail
cd "$(dirname "$0")/../.."

OASDIFF=${OASDIFF:-go run github.com/oasdiff/oasdiff@v1.38.0}
SPEC=docs/openapi.json
ALLOWED=docs/BREAKING-ALLOWED

skip() {
	echo "spec-breaking: skipped: $*"
	exit 0
}

command -v git >/dev/null || skip "git is not installed"
git rev-parse --git-dir >/dev/null 2>&1 || skip "not a git checkout"

base=${SPEC_BASE:-}
what="SPEC_BASE"
if [ -z "$base" ]; then
	tag=$(git describe --tags --abbrev=0 --match 'v[0-9]*' HEAD 2>/dev/null || true)
	if [ -n "$tag" ]; then
		base=$tag
		what="the release tag $tag"
	else
		main=""
		for ref in origin/main main; do
			if git rev-parse -q --verify "$ref^{commit}" >/dev/null; then
				main=$ref
				break
			fi
		done
		[ -n "$main" ] || skip "no main branch (origin/main or main) to compare with"
		if [ "$(git rev-parse "$main")" = "$(git rev-parse HEAD)" ]; then
			base=$(git rev-parse -q --verify 'HEAD~1^{commit}') || skip "HEAD is $main and has no parent here (a shallow clone?)"
			what="HEAD~1 (HEAD is $main)"
		else
			base=$(git merge-base HEAD "$main" 2>/dev/null) || skip "no merge base of HEAD and $main (a shallow clone?)"
			what="the merge base with $main"
		fi
	fi
fi
git cat-file -e "$base:$SPEC" 2>/dev/null || skip "$what ($base) has no $SPEC"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git show "$base:$SPEC" >"$tmp/base.json"
echo "spec-breaking: $SPEC against $what ($(git rev-parse --short "$base"))"

ignore=()
if [ -s "$ALLOWED" ]; then
	ignore=(--err-ignore "$ALLOWED")
fi
if $OASDIFF breaking "$tmp/base.json" "$SPEC" --fail-on ERR --color never --format singleline "${ignore[@]}" >"$tmp/out"; then
	echo "spec-breaking: ok, no unlisted breaking change ($(head -n1 "$tmp/out"))"
	exit 0
fi
cat "$tmp/out"
echo
if ! grep -q '^error' "$tmp/out"; then
	echo "spec-breaking: oasdiff failed"
	exit 1
fi
echo "spec-breaking: $SPEC has breaking changes against $what that $ALLOWED does not list."
echo "If they are intended, add these lines to $ALLOWED (with a comment saying why) and commit it:"
echo
sed -n 's/^error at [^,]*, in API \([A-Z]* [^ ]*\) \(.*\) \[[a-z0-9-]*\]\..*$/\1 \2/p' "$tmp/out"
exit 1
