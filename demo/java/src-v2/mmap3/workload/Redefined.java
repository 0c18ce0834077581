package mmap3.workload;

/**
 * The second version of {@link Redefined}, which {@link Redefine} installs with
 * Instrumentation.redefineClasses(): the same method, its loop on lines 40 and after.
 */
final class Redefined {
    private Redefined() {}
    //
    //
    //
    //
    //
    //
    //
    //
    //
    //
    //
    //
    //
    //
    //
    //
    //
    //
    //
    //
    //
    //
    //
    //
    //
    //
    //

    static long spin(int n) {
        long acc = n;
        for (int i = 0; i < n; i++) {
            acc ^= acc >>> 31;
            acc = acc * 0xC2B2AE3D27D4EB4FL + i;
        }
        return acc;
    }
}
