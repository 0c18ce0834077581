#!/usr/bin/env bash
# Builds the Java workload: build.sh OUTDIR makes OUTDIR/classes and OUTDIR/workload.jar.
# -g keeps line numbers and source file names, for a profiler to map code to lines.
set -euo pipefail
if [ $# -ne 1 ]; then
	echo "usage: $0 OUTDIR" >&2
	exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
out=$1
jdk=${JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}
javac=$jdk/bin/javac
jar=$jdk/bin/jar
if [ ! -x "$javac" ] || [ ! -x "$jar" ]; then
	echo "$0: no javac/jar in $jdk/bin (set JAVA_HOME to a JDK 17+)" >&2
	exit 1
fi
# From scratch each time (it takes seconds): no stale classes survive a renamed source.
rm -rf "$out/classes" "$out/workload.jar"
mkdir -p "$out/classes"
mapfile -t srcs < <(find "$here/src" -name '*.java' | sort)
# On one CPU: under QEMU TCG with several vCPUs, HotSpot's patch of a
# method's entry (one 8-byte store) is sometimes executed half old, half
# new by another vCPU, which crashes the JVM (SIGSEGV or SIGILL in JIT
# code); pinned, it does not. (JAVA_PIN= turns this off.)
pin=(${JAVA_PIN-taskset -c 0})
command -v taskset >/dev/null || pin=()
"${pin[@]}" "$javac" --release 17 -g -d "$out/classes" "${srcs[@]}"
"${pin[@]}" "$jar" --create --file "$out/workload.jar" --main-class mmap3.workload.Main -C "$out/classes" .
