/**
 * Primitive costs of a Java program, one "NAME NS_PER_OP" line each; plain
 * Java, so the same source runs on HotSpot and, compiled by TeaVM, as a
 * Warden task (the benchmark harness runs both).
 *
 *   call       an interface call to an empty method (two implementations
 *              in use, so neither compiler can bind it statically; HotSpot
 *              is also told not to inline nop)
 *   alloc      new Object(), kept reachable through a field
 *   exception  throw and catch a new Exception
 *
 * Each runs twice and the second run is reported (after HotSpot's JIT).
 */
public class JavaPrims {
    interface Op { void nop(); }

    static final class A implements Op { public void nop() {} }

    static final class B implements Op { public void nop() {} }

    static Object sink;

    public static void main(String[] args) {
        long n = args.length > 0 ? Long.parseLong(args[0]) : 1_000_000;
        Op[] ops = {new A(), new B()};
        for (int round = 0; round < 2; round++) {
            boolean report = round == 1;
            long t = System.nanoTime();
            for (long i = 0; i < n; i++) ops[(int) (i & 1)].nop();
            print(report, "call", t, n);
            t = System.nanoTime();
            for (long i = 0; i < n; i++) sink = new Object();
            print(report, "alloc", t, n);
            long m = Math.max(n / 100, 1000);
            t = System.nanoTime();
            for (long i = 0; i < m; i++) {
                try {
                    throw new Exception("x");
                } catch (Exception e) {
                    sink = e;
                }
            }
            print(report, "exception", t, m);
        }
    }

    static void print(boolean report, String name, long t0, long n) {
        double ns = (System.nanoTime() - t0) / (double) n;
        if (report) System.out.println(name + " " + ns);
    }
}
