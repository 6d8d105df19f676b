// JVM primitive costs and thread IPC, one "<name> <ns per op>" line each.
//   java -XX:CompileCommand=quiet -XX:CompileCommand=dontinline,Prims::nop Prims N [prims|ipc]
//   (only the primitives, or only the round trips; both by default)
//
//   call       a virtual call to an empty method, not inlined
//   alloc      new Object()
//   thread     create, start and join an empty Thread
//   thread_batch  the same, all started first, then all joined
//   exception  new Throwable() (fills in its stack trace)
//   sq_null, sq_int3, sq_str100
//              a round trip between two threads through a pair of
//              SynchronousQueues: an empty request, three ints (the
//              server sums them), a 100-character String (the server
//              returns its length). Objects pass by reference: no copy.
// Each measure runs twice and reports the second run (after the JIT).
import java.util.concurrent.SynchronousQueue;

public class Prims {
    static volatile Object sink;
    static final Object NULL = new Object();

    void nop() {}

    interface Measure { void run(long n) throws Exception; }

    static void time(String name, long n, Measure m) throws Exception {
        m.run(n);
        long t0 = System.nanoTime();
        m.run(n);
        System.out.printf("%s %.2f%n", name, (System.nanoTime() - t0) / (double) n);
    }

    public static void main(String[] args) throws Exception {
        long n = args.length > 0 ? Long.parseLong(args[0]) : 1_000_000;
        String only = args.length > 1 ? args[1] : "";
        if (!only.equals("ipc")) prims(n);
        if (!only.equals("prims")) ipc(n);
    }

    static void prims(long n) throws Exception {
        Prims p = new Prims();
        time("call", n, k -> { for (long i = 0; i < k; i++) p.nop(); });
        time("alloc", n, k -> { for (long i = 0; i < k; i++) sink = new Object(); });
        time("thread", Math.max(n / 1000, 10), k -> {
            for (long i = 0; i < k; i++) { Thread t = new Thread(() -> {}); t.start(); t.join(); }
        });
        time("thread_batch", Math.max(n / 1000, 10), k -> {
            Thread[] all = new Thread[(int) k];
            for (int i = 0; i < k; i++) { all[i] = new Thread(() -> {}); all[i].start(); }
            for (Thread t : all) t.join();
        });
        time("exception", Math.max(n / 100, 10), k -> { for (long i = 0; i < k; i++) sink = new Throwable(); });
    }

    static void ipc(long n) throws Exception {

        SynchronousQueue<Object> req = new SynchronousQueue<>(), resp = new SynchronousQueue<>();
        Thread server = new Thread(() -> {
            try {
                for (;;) {
                    Object m = req.take();
                    if (m instanceof int[] v) resp.put(v[0] + v[1] + v[2]);
                    else if (m instanceof String s) resp.put(s.length());
                    else resp.put(NULL);
                }
            } catch (InterruptedException e) { /* done */ }
        });
        server.setDaemon(true);
        server.start();
        long rt = Math.max(n / 50, 100);
        String str = "x".repeat(99);
        time("sq_null", rt, k -> { for (long i = 0; i < k; i++) { req.put(NULL); resp.take(); } });
        time("sq_int3", rt, k -> { for (long i = 0; i < k; i++) { req.put(new int[] {1, 2, 3}); resp.take(); } });
        time("sq_str100", rt, k -> { for (long i = 0; i < k; i++) { req.put(new String(str)); resp.take(); } });
    }
}
