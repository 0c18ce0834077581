package mmap3.workload;

/** First used after the warm-up: breaks the assumption that every Shape is a Circle. */
record Square(double side) implements Shape {
    @Override
    public double area() {
        return side * side;
    }
}
