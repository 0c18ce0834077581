package mmap3.workload;

/** A third Shape makes the call site megamorphic, so the recompiled code differs again. */
record Triangle(double base, double height) implements Shape {
    @Override
    public double area() {
        return 0.5 * base * height;
    }
}
