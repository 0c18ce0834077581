package mmap3.workload;

/** The only Shape of the warm-up, so the JIT compiles Shapes.total for it alone. */
record Circle(double r) implements Shape {
    @Override
    public double area() {
        return Math.PI * r * r;
    }
}
