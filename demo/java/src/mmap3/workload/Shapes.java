package mmap3.workload;

import java.util.Random;

/** A call site that is deoptimized and recompiled when the classes flowing through it change. */
final class Shapes {
    private Shapes() {}

    /**
     * Compiled first while every element is a Circle: C2 inlines Circle.area() behind a type
     * guard (or none at all while Circle is the only Shape loaded). Squares and Triangles then
     * fail that assumption, the code is deoptimized (made not entrant) and compiled again.
     */
    static double total(Shape[] shapes) {
        double sum = 0;
        for (Shape s : shapes) {
            sum += s.area();
        }
        return sum;
    }

    /** n Circles. */
    static Shape[] circles(int n, long seed) {
        Random rnd = new Random(seed);
        Shape[] shapes = new Shape[n];
        for (int i = 0; i < n; i++) {
            shapes[i] = new Circle(1 + rnd.nextDouble());
        }
        return shapes;
    }

    /** n Shapes of all three classes in random order (Square and Triangle load here). */
    static Shape[] mixed(int n, long seed) {
        Random rnd = new Random(seed);
        Shape[] shapes = new Shape[n];
        for (int i = 0; i < n; i++) {
            double x = 1 + rnd.nextDouble();
            shapes[i] = switch (rnd.nextInt(3)) {
                case 0 -> new Circle(x);
                case 1 -> new Square(x);
                default -> new Triangle(x, 2 - x);
            };
        }
        return shapes;
    }
}
