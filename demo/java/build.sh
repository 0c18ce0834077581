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
rm -rf "$out/classes" "$out/v2" "$out/workload.jar" "$out/manifest.txt"
mkdir -p "$out/classes"
mapfile -t srcs < <(find "$here/src" -name '*.java' | sort)
# On one CPU: under QEMU TCG with several vCPUs, HotSpot's patch of a
# method's entry (one 8-byte store) is sometimes executed half old, half
# new by another vCPU, which crashes the JVM (SIGSEGV or SIGILL in JIT
# code); pinned, it does not. (JAVA_PIN= turns this off.)
pin=(${JAVA_PIN-taskset -c 0})
command -v taskset >/dev/null || pin=()
"${pin[@]}" "$javac" --release 17 -g -d "$out/classes" "${srcs[@]}"
# The second version of the class that mmap3.workload.Redefine redefines,
# as a resource of the jar.
rm -rf "$out/v2"
"${pin[@]}" "$javac" --release 17 -g -d "$out/v2" "$here/src-v2/mmap3/workload/Redefined.java"
cp "$out/v2/mmap3/workload/Redefined.class" "$out/classes/mmap3/workload/Redefined.v2"
# The jar is a Java agent too (-javaagent), for Redefine's Instrumentation.
printf 'Premain-Class: mmap3.workload.Redefine\nCan-Redefine-Classes: true\n' >"$out/manifest.txt"
"${pin[@]}" "$jar" --create --file "$out/workload.jar" --main-class mmap3.workload.Main \
	--manifest "$out/manifest.txt" -C "$out/classes" .
