package mmap3.workload;

/**
 * The class that {@link Redefine} redefines. This is its first version; src-v2 has the second,
 * whose loop sits on lines 40 and after, so that a profile tells the two versions' code apart by
 * its source lines.
 */
final class Redefined {
    private Redefined() {}

    static long spin(int n) {
        long acc = n;
        for (int i = 0; i < n; i++) {
            acc ^= acc >>> 29;
            acc = acc * 0x9E3779B97F4A7C15L + i;
        }
        return acc;
    }
}
