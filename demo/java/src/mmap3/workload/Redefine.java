package mmap3.workload;

import java.io.IOException;
import java.io.InputStream;
import java.lang.instrument.ClassDefinition;
import java.lang.instrument.Instrumentation;

/**
 * Runs {@link Redefined#spin} hot, redefines the class with its second version (the resource
 * mmap3/workload/Redefined.v2, compiled from src-v2), and runs it hot again: the JIT compiles the
 * new version under the same method. Needs the workload jar as a Java agent too
 * ({@code -javaagent:workload.jar}), for the Instrumentation that redefines classes.
 *
 * <p>Usage: java -javaagent:workload.jar -cp workload.jar mmap3.workload.Redefine [--seconds S]
 * (each version runs S/2 seconds; default 4)
 */
public final class Redefine {
    private static Instrumentation instrumentation;
    private static long sink;

    private Redefine() {}

    /** Called before main() when the jar is given with -javaagent. */
    public static void premain(String args, Instrumentation inst) {
        instrumentation = inst;
    }

    private static void run(double seconds) {
        long end = System.nanoTime() + (long) (seconds * 1e9);
        while (System.nanoTime() < end) {
            sink += Redefined.spin(20000);
        }
    }

    public static void main(String[] args) throws Exception {
        double seconds = 4;
        if (args.length == 2 && args[0].equals("--seconds")) {
            seconds = Double.parseDouble(args[1]);
        } else if (args.length != 0) {
            System.err.println("usage: java -javaagent:workload.jar -cp workload.jar"
                    + " mmap3.workload.Redefine [--seconds S]");
            System.exit(2);
        }
        if (instrumentation == null || !instrumentation.isRedefineClassesSupported()) {
            System.err.println("mmap3.workload.Redefine: no Instrumentation that redefines"
                    + " classes (run with -javaagent:workload.jar)");
            System.exit(2);
        }
        run(seconds / 2);
        byte[] v2;
        try (InputStream in = Redefine.class.getResourceAsStream("Redefined.v2")) {
            if (in == null) {
                throw new IOException("no resource mmap3/workload/Redefined.v2");
            }
            v2 = in.readAllBytes();
        }
        instrumentation.redefineClasses(new ClassDefinition(Redefined.class, v2));
        System.out.println("redefined");
        run(seconds / 2);
        System.out.println("sink " + sink);
    }
}
