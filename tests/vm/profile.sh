# shellcheck shell=bash
# Sourced by the VM tests that record a JIT workload (jit-e2e, java-jit,
# node-jit), after they define fail() and set TOP and logs.

# shellcheck source=scripts/profile-jit-lib.sh
. "$TOP/scripts/profile-jit-lib.sh"

# profile NAME [PROFILE-JIT-ARGS...] -- COMMAND...: scripts/profile-jit of
# COMMAND into NAME/ (perf.data, out, err, report, samples...), its result
# in r[KEY]. NAME's report, output and errors are copied to $logs as
# NAME.*. When a step failed: a FAIL line for NAME that says which and why,
# and status 1.
profile() {
	local name=$1 k errf
	shift
	profile_jit "$name" "$@"
	for k in report out err inject.err report.err misnamed; do
		cp "$name/$k" "$logs/$name.$k" 2>/dev/null
	done
	[ "${r[status]}" = ok ] && return 0
	errf=$name/err
	case ${r[step]:-} in inject | report) errf=$name/${r[step]}.err ;; esac
	fail "$name" "${r[step]:-profile-jit} ${r[status]}: $(tail -2 "$errf" 2>/dev/null | tr '\n' ' ')"
	return 1
}
