package mmap3.workload;

/** Plain hot code: an arithmetic loop with a tiny helper that the JIT inlines into it. */
final class Hot {
    private Hot() {}

    /**
     * The hot loop. Called many times with a moderate {@code n} rather than once with a huge
     * one, so that HotSpot compiles it normally (entered at its start), not only on-stack.
     */
    static long spin(int n) {
        long acc = n;
        for (int i = 0; i < n; i++) {
            acc = rotateMix(acc + i);
        }
        return acc;
    }

    /**
     * Called only from {@link #spin}. About 20 bytes of bytecode, under MaxInlineSize (35), so C1
     * and C2 inline it there: its time shows up inside spin's compiled code, and it is never a
     * hot method of its own in a profile (a profiler that resolves inlined frames may name it).
     */
    static long rotateMix(long x) {
        x ^= x >>> 31;
        x *= 0x9E3779B97F4A7C15L;
        return Long.rotateLeft(x, 17);
    }
}
