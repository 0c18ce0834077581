package mmap3.workload;

/** The receiver type of the call site in {@link Shapes#total} that goes from one class to three. */
interface Shape {
    double area();
}
