/*
 * A Java workload for exercising a JIT profiler (perf with a JVMTI agent on libperfjit):
 * it makes HotSpot compile, inline, deoptimize, recompile and unload code, in phases that
 * each put one clearly named method on the CPU:
 *
 *   hot code         Hot.spin(int), with Hot.rotateMix(long) inlined into it;
 *   deopt/recompile  Shapes.total(Shape[]), compiled while it sees only Circles, then fed
 *                    Squares and Triangles: made not entrant, compiled again;
 *   class unloading  PluginImpl.work(int), defined by a throw-away class loader, compiled,
 *                    then unloaded with its loader (and its compiled code), followed by
 *                    more hot code so that a profiler sees time after the unload.
 *
 * Phases are timed (System.nanoTime), so the run takes about --seconds however slow the
 * machine (a QEMU TCG guest is ~10x slower), with a minimum number of calls per phase so
 * that the JIT compiles the methods even there. --ready-file and --wait-file let a test
 * attach a profiler late, to a JVM that has compiled for a while.
 */
package mmap3.workload;

import java.lang.ref.WeakReference;
import java.nio.file.Files;
import java.nio.file.Path;

public final class Main {
    /** The Java methods that a profiler should name, as the last line prints them. */
    static final String HOT = "mmap3.workload.Hot.spin(int)"
            + " mmap3.workload.Shapes.total(Shape[])"
            + " mmap3.workload.PluginImpl.work(int)";

    /**
     * Every phase calls its method at least this often, even when its time is up: HotSpot's
     * tiered thresholds want ~200 calls for C1 and ~600 more for C2 (more when the compile
     * queues are long), and a deoptimized method must climb them again.
     */
    static final int MIN_CALLS = 3000;

    /** MIN_CALLS, or --calls: with a short --seconds, a run of fixed work (benchmarks). */
    private static int minCalls = MIN_CALLS;

    /** Per-call work at level 0 (loop iterations, array length); it doubles per level. */
    static final int SPIN_N = 1000;
    static final int SHAPES_N = 256;
    static final int WORK_N = 1000;
    static final int MAX_LEVEL = 12;

    static final long WAIT_POLL_MS = 50;
    static final long WAIT_MAX_MS = 60_000;

    /** Results end up here, so that the JIT cannot drop the work as dead code. */
    static volatile long sink;

    private final long sliceNanos;
    private final StringBuilder report = new StringBuilder();

    private Main(double seconds) {
        // Six timed phases: two of warm-up (1/3 of the time), four measured.
        sliceNanos = (long) (seconds * 1e9 / 6);
    }

    /**
     * The work level of a phase's next call: work doubles every 1024 calls, up to 2^MAX_LEVEL.
     * Short calls first, so that the thresholds above are reached early even on a slow
     * machine; longer ones later, so that a phase makes only ~10^4 calls on a fast one.
     * That keeps the phase loops below HotSpot's on-stack-replacement threshold (60000 loop
     * back-edges per method, counted over all its calls): an OSR-compiled phase loop would
     * inline the hot method, and a profiler would then see its time in Main instead of in
     * the method by name (measured: no phase loop is compiled up to --seconds 120 on a
     * fast host). For the same reason every phase loop calls its hot method directly, not
     * through a lambda, which would get compiled with the method inlined into it.
     */
    private static int level(long calls) {
        return (int) Math.min(calls >> 10, MAX_LEVEL);
    }

    private void done(String phase, long calls, long startNanos) {
        long ms = (System.nanoTime() - startNanos) / 1_000_000;
        report.append("phase ").append(phase).append(": ").append(calls)
                .append(" iterations, ").append(ms).append(" ms\n");
    }

    /** Calls Hot.spin for one slice of time. */
    private void spinPhase(String phase) {
        long start = System.nanoTime();
        long end = start + sliceNanos;
        long calls = 0;
        long acc = 0;
        while (calls < minCalls || System.nanoTime() < end) {
            acc += Hot.spin(SPIN_N << level(calls));
            calls++;
        }
        sink = acc;
        done(phase, calls, start);
    }

    /** Calls Shapes.total for one slice of time, on arrays that repeat {@code base}. */
    private void shapesPhase(String phase, Shape[] base) {
        long start = System.nanoTime();
        long end = start + sliceNanos;
        Shape[][] byLevel = new Shape[MAX_LEVEL + 1][];
        long calls = 0;
        double acc = 0;
        while (calls < minCalls || System.nanoTime() < end) {
            int k = level(calls);
            if (byLevel[k] == null) {
                byLevel[k] = repeat(base, base.length << k);
            }
            acc += Shapes.total(byLevel[k]);
            calls++;
        }
        sink = Double.doubleToRawLongBits(acc);
        done(phase, calls, start);
    }

    /** An array of n references that cycle through base (longer arrays, no more objects). */
    private static Shape[] repeat(Shape[] base, int n) {
        Shape[] a = new Shape[n];
        for (int i = 0; i < n; i += base.length) {
            System.arraycopy(base, 0, a, i, Math.min(base.length, n - i));
        }
        return a;
    }

    /**
     * Loads PluginImpl in a new class loader and calls its work() for one slice of time.
     * Returns only a weak reference to the class: once this frame is gone nothing holds the
     * loader, the class, or the instance.
     */
    private WeakReference<Class<?>> pluginPhase(String phase) throws ReflectiveOperationException {
        long start = System.nanoTime();
        long end = start + sliceNanos;
        Class<?> cls = new PluginLoader(Main.class.getClassLoader()).loadClass(PluginLoader.PLUGIN);
        Task task = (Task) cls.getDeclaredConstructor().newInstance();
        long calls = 0;
        long acc = 0;
        while (calls < minCalls || System.nanoTime() < end) {
            acc += task.work(WORK_N << level(calls));
            calls++;
        }
        sink = acc;
        done(phase, calls, start);
        return new WeakReference<>(cls);
    }

    /**
     * Full GCs (System.gc()) unload the plugin's class with its loader, and its compiled code
     * with it. A few of them with short sleeps, and more while the class is still reachable.
     * Returns whether the class is gone.
     */
    private boolean unloadPhase(String phase, WeakReference<Class<?>> plugin)
            throws InterruptedException {
        long start = System.nanoTime();
        int gcs = 0;
        while (gcs < 3 || (plugin.get() != null && gcs < 10)) {
            System.gc();
            gcs++;
            Thread.sleep(20);
        }
        done(phase, gcs, start);
        return plugin.get() == null;
    }

    /** Waits until path exists, polling. False after WAIT_MAX_MS. */
    private static boolean waitFor(Path path) throws InterruptedException {
        long deadline = System.nanoTime() + WAIT_MAX_MS * 1_000_000;
        while (!Files.exists(path)) {
            if (System.nanoTime() > deadline) {
                return false;
            }
            Thread.sleep(WAIT_POLL_MS);
        }
        return true;
    }

    private static void usage(String problem) {
        if (problem != null) {
            System.err.println("mmap3.workload.Main: " + problem);
        }
        System.err.println("usage: java -cp workload.jar mmap3.workload.Main"
                + " [--seconds S] [--calls N] [--ready-file PATH] [--wait-file PATH]");
        System.exit(2);
    }

    public static void main(String[] args) throws Exception {
        double seconds = 6;
        Path readyFile = null;
        Path waitFile = null;
        for (int i = 0; i < args.length; i++) {
            String opt = args[i];
            if (opt.equals("-h") || opt.equals("--help")) {
                usage(null);
            }
            if (i + 1 >= args.length) {
                usage("missing value for " + opt);
            }
            String val = args[++i];
            switch (opt) {
                case "--seconds" -> {
                    try {
                        seconds = Double.parseDouble(val);
                    } catch (NumberFormatException e) {
                        usage("bad --seconds: " + val);
                    }
                    if (!(seconds > 0)) {
                        usage("bad --seconds: " + val);
                    }
                }
                case "--calls" -> {
                    try {
                        minCalls = Integer.parseInt(val);
                    } catch (NumberFormatException e) {
                        usage("bad --calls: " + val);
                    }
                    if (minCalls < 1) {
                        usage("bad --calls: " + val);
                    }
                }
                case "--ready-file" -> readyFile = Path.of(val);
                case "--wait-file" -> waitFile = Path.of(val);
                default -> usage("unknown option " + opt);
            }
        }

        Main m = new Main(seconds);

        // Warm-up: Hot.spin and Shapes.total (Circles only) get compiled.
        m.spinPhase("warmup-spin");
        m.shapesPhase("warmup-circles", Shapes.circles(SHAPES_N, 1));
        if (readyFile != null) {
            Files.write(readyFile, new byte[0]);
        }
        if (waitFile != null && !waitFor(waitFile)) {
            System.err.println("mmap3.workload.Main: " + waitFile + " did not appear in "
                    + WAIT_MAX_MS / 1000 + " s");
            System.exit(3);
        }

        // Measured: code compiled before (spin), a deopt and recompile (mixed shapes),
        // a class loaded, compiled and unloaded (plugin, unload), then hot code after that.
        m.spinPhase("spin");
        m.shapesPhase("mixed-shapes", Shapes.mixed(SHAPES_N, 2));
        WeakReference<Class<?>> plugin = m.pluginPhase("plugin");
        boolean unloaded = m.unloadPhase("unload", plugin);
        m.spinPhase("after-unload");

        System.out.print(m.report);
        System.out.println((unloaded ? "unloaded: " : "NOT unloaded: ") + PluginLoader.PLUGIN);
        System.out.println("hot: " + HOT);
        System.out.flush();
        if (!unloaded) {
            System.exit(1);
        }
    }
}
