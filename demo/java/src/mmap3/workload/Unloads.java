package mmap3.workload;

import java.lang.ref.WeakReference;
import java.util.ArrayList;
import java.util.List;

/**
 * A long-running JVM whose compiled code comes and goes with its classes, as in an application
 * server that redeploys or a host of plugins: round after round, PluginImpl is defined in many
 * throw-away class loaders, each copy run until its work() is compiled, then all are dropped
 * and collected with their code. Used to check that a profiling agent's state stays bounded
 * by what is live.
 *
 * <p>usage: java -cp workload.jar mmap3.workload.Unloads [--rounds R] [--classes N] [--calls C]
 */
public final class Unloads {
    private static long sink;

    private Unloads() {}

    private static int positive(String opt, String val) {
        try {
            int n = Integer.parseInt(val);
            if (n > 0) {
                return n;
            }
        } catch (NumberFormatException e) {
            // Reported below.
        }
        System.err.println("mmap3.workload.Unloads: bad " + opt + ": " + val);
        System.exit(2);
        return 0;
    }

    public static void main(String[] args) throws Exception {
        int rounds = 10;
        int classes = 100;
        int calls = 2000;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--rounds" -> rounds = positive(args[i], args[i + 1]);
                case "--classes" -> classes = positive(args[i], args[i + 1]);
                case "--calls" -> calls = positive(args[i], args[i + 1]);
                default -> {
                    System.err.println("usage: java -cp workload.jar mmap3.workload.Unloads"
                            + " [--rounds R] [--classes N] [--calls C]");
                    System.exit(2);
                }
            }
        }
        for (int r = 0; r < rounds; r++) {
            List<WeakReference<Class<?>>> copies = new ArrayList<>();
            for (int c = 0; c < classes; c++) {
                Class<?> cls = new PluginLoader(Unloads.class.getClassLoader())
                        .loadClass(PluginLoader.PLUGIN);
                Task task = (Task) cls.getDeclaredConstructor().newInstance();
                long acc = 0;
                for (int i = 0; i < calls; i++) {
                    acc += task.work(64);
                }
                sink += acc;
                copies.add(new WeakReference<>(cls));
            }
            int live = classes;
            for (int gc = 0; gc < 10 && live > 0; gc++) {
                System.gc();
                Thread.sleep(20);
                live = (int) copies.stream().filter(w -> w.get() != null).count();
            }
            System.out.println("round " + r + ": " + (classes - live) + " of " + classes
                    + " classes unloaded");
        }
        System.out.println("sink " + sink);
    }
}
