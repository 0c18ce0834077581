# Shared definitions for the series scripts. Sourced, not executed.
# Every path can be overridden from the environment, which is how the
# tests run these scripts against a small throwaway base.

TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOCK=${MMAP3_LOCK:-$TOP/base/linux.lock}
PATCHES=${MMAP3_PATCHES:-$TOP/patches}
TREE=${MMAP3_TREE:-$TOP/build/linux}
BASE_TAG=base

# A fixed identity and date for the base commit, so that the base commit id
# depends on the tarball alone.
export GIT_AUTHOR_NAME="mmap3 base" GIT_AUTHOR_EMAIL="base@mmap3.invalid"
export GIT_COMMITTER_NAME="${GIT_COMMITTER_NAME:-mmap3 tree}"
export GIT_COMMITTER_EMAIL="${GIT_COMMITTER_EMAIL:-tree@mmap3.invalid}"

die() { echo "${0##*/}: error: $*" >&2; exit 1; }
warn() { echo "${0##*/}: warning: $*" >&2; }
note() { echo "${0##*/}: $*" >&2; }

load_lock() {
	[ -r "$LOCK" ] || die "no base lock file $LOCK"
	# shellcheck disable=SC1090
	. "$LOCK"
	[ -n "${TARBALL:-}" ] || die "$LOCK names no TARBALL"
}

tgit() { git -C "$TREE" "$@"; }

# The patch files named by patches/series, in order.
series_files() {
	[ -f "$PATCHES/series" ] || return 0
	sed -e 's/#.*//' -e 's/[[:space:]]*$//' -e '/^$/d' "$PATCHES/series"
}

# Export base..HEAD of the tree as patch files into directory $1, with
# stable names and none of the noise that changes from run to run (commit
# ids, git version signature, abbreviation length).
export_to() {
	local out=$1
	mkdir -p "$out"
	tgit -c core.abbrev=12 -c diff.noprefix=false -c format.signoff=false \
		format-patch --quiet --zero-commit --no-signature -N \
		--subject-prefix=PATCH --no-cover-letter --no-thread \
		-o "$out" "$BASE_TAG..HEAD" >/dev/null
}

# Uncommitted work in the tree: changes, and new files whether or not a
# .gitignore matches them (builds are out of tree, so an ignored file in
# the tree is one somebody made).
tree_dirty() {
	tgit status --porcelain --untracked-files=all --ignored=matching
}

SYNC_FILE() { echo "$TREE/.git/mmap3-synced"; }

# Record that the tree's HEAD is exactly what patches/ says: one line per
# applied patch, "<commit> <sha256 of patch file> <file>". With an argument N,
# only the first N patches of the series (after a patch failed to apply).
record_sync() {
	local f commit commits i=0 n=${1:-999999}
	mapfile -t commits < <(tgit rev-list --reverse "$BASE_TAG..HEAD")
	: >"$(SYNC_FILE).new"
	while read -r f; do
		[ $i -lt "$n" ] || break
		commit=${commits[$i]:-}
		[ -n "$commit" ] || die "internal: fewer commits than patches"
		echo "$commit $(sha256sum <"$PATCHES/$f" | cut -d' ' -f1) $f" >>"$(SYNC_FILE).new"
		i=$((i + 1))
	done < <(series_files)
	mv "$(SYNC_FILE).new" "$(SYNC_FILE)"
}

# A patch with its volatile parts dropped: blob ids ("index" lines) and the
# diffstat, which a hand-edited patch file leaves stale but which carry no
# work of their own.
normalized_patch() {
	sed -e '/^index [0-9a-f]*\.\.[0-9a-f]*/d' \
		-e '/^---$/,/^diff --git /{/^diff --git /!d}' "$1"
}

# Do patch files $1 and $2 hold the same change and message?
same_patch() {
	cmp -s "$1" "$2" && return 0
	[ -f "$1" ] && [ -f "$2" ] || return 1
	cmp -s <(normalized_patch "$1") <(normalized_patch "$2")
}
