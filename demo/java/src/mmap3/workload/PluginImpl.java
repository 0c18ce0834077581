package mmap3.workload;

/**
 * Code that is unloaded: Main never names this class; PluginLoader defines it from its class
 * file bytes in a throw-away loader, runs work() until it is compiled, then drops the loader,
 * and the class and its compiled code go away at the next full GC.
 */
public final class PluginImpl implements Task {
    /** A loop of its own (an FNV-1a style hash of the counter), distinct from Hot.spin. */
    @Override
    public long work(int n) {
        long h = 0xCBF29CE484222325L;
        for (int i = 0; i < n; i++) {
            h ^= i & 0xFF;
            h *= 0x100000001B3L;
        }
        return h;
    }
}
