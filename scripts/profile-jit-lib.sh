# shellcheck shell=bash
# Sourced by the callers of scripts/profile-jit (the demo, the VM tests,
# the bench): profile_jit(), which runs it and reads its result.

PROFILE_JIT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/profile-jit

# The result of the last profile_jit: r[status], r[record_s], r[jit_named]...
declare -A r

# profile_jit DIR [PROFILE-JIT-ARGS...] -- COMMAND...: scripts/profile-jit
# of COMMAND into DIR, its result in r[KEY] (r[status] is "failed" when
# there is none: bad usage, or DIR unwritable). Status 0 when every step ran.
profile_jit() {
	local dir=$1 k v
	shift
	r=()
	"$PROFILE_JIT" -o "$dir" "$@" >/dev/null
	if [ -f "$dir/result" ]; then
		while IFS='=' read -r k v; do r[$k]=$v; done <"$dir/result"
	fi
	[ -n "${r[status]:-}" ] || r[status]=failed
	[ "${r[status]}" = ok ]
}
