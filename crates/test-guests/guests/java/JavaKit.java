import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import warden.MemoryObject;
import warden.Portal;
import warden.Request;
import warden.Service;
import warden.Socket;
import warden.Supervisor;
import warden.Task;
import warden.WardenException;

/**
 * A Java test guest (compiled by TeaVM): argv[0] picks what it does.
 *
 *   basics ARGS...  prints its arguments, computes, allocates, throws and catches
 *   hog             allocates 1 MiB arrays, keeping them, until it dies
 *   spin            loops for ever
 *   serve NAME N    serves NAME: replies with the request reversed, N calls
 *   call NAME TEXT  calls NAME with TEXT, prints the reply; then the errors
 *   family          spawns itself: a child that exits, one over its CPU
 *                   limit, one killed; waits with a timeout
 *   supervise       a supervisor (warden.Supervisor): a spinning child
 *                   killed and restarted, then a child exiting 3 until
 *                   the supervisor gives up; prints each report
 *   exit N          exits with N
 *   memobj          a memory object written and read back
 *   tcp             a listener, a connection to it, bytes both ways; then
 *                   a connection the manifest does not grant
 */
public class JavaKit {
    static class Odd extends Exception {
        final int value;

        Odd(int value) {
            super("odd: " + value);
            this.value = value;
        }
    }

    public static void main(String[] args) {
        String mode = args.length > 0 ? args[0] : "basics";
        switch (mode) {
            case "basics": basics(args); break;
            case "hog": hog(); break;
            case "spin": spin(); break;
            case "serve": serve(args[1], Integer.parseInt(args[2])); break;
            case "call": call(args[1], args[2]); break;
            case "family": family(); break;
            case "supervise": supervise(); break;
            case "exit": Task.exit(Integer.parseInt(args[1])); break;
            case "memobj": memobj(); break;
            case "tcp": tcp(); break;
            default:
                System.out.println("unknown mode " + mode);
                Task.exit(2);
        }
    }

    static void basics(String[] args) {
        System.out.println("args: " + String.join(" ", args));
        System.out.println("env: USER=" + Task.env("USER") + " HOME=" + Task.env("HOME")
                + " unset=" + Task.env("UNSET") + " prefix=" + Task.env("US"));
        // Primes below 100,000 with a sieve.
        boolean[] composite = new boolean[100_000];
        int primes = 0;
        for (int i = 2; i < composite.length; i++) {
            if (!composite[i]) {
                primes++;
                for (int j = i * 2; j < composite.length; j += i) composite[j] = true;
            }
        }
        System.out.println("primes below 100000: " + primes);
        // 8 MiB in live objects, then garbage.
        List<int[]> kept = new ArrayList<>();
        long sum = 0;
        for (int i = 0; i < 64; i++) {
            int[] a = new int[32 * 1024];
            a[a.length - 1] = i;
            kept.add(a);
        }
        for (int[] a : kept) sum += a[a.length - 1];
        System.out.println("allocated " + kept.size() + " arrays, sum " + sum);
        // Sleeps, with the heap moved on by a small array before each, so
        // that the sleep's buffers land at differently aligned addresses.
        long t0 = System.nanoTime();
        for (int i = 0; i < 4; i++) {
            kept.add(new int[i + 1]);
            Task.sleep(5_000_000L);
        }
        long sleptMs = (System.nanoTime() - t0) / 1_000_000;
        System.out.println("slept " + (sleptMs >= 20 ? "at least" : "less than") + " 20 ms");
        int caught = 0;
        for (int i = 0; i < 10; i++) {
            try {
                check(i);
            } catch (Odd e) {
                caught += e.value;
            }
        }
        try {
            Object o = "text";
            Integer bad = (Integer) o;
            System.out.println("no exception: " + bad);
        } catch (ClassCastException e) {
            caught += 1000;
        }
        try {
            int[] small = new int[1];
            small[args.length + 5] = 1;
        } catch (ArrayIndexOutOfBoundsException e) {
            caught += 10000;
        }
        System.out.println("caught " + caught);
    }

    static void check(int i) throws Odd {
        if (i % 2 == 1) throw new Odd(i);
    }

    static void hog() {
        List<byte[]> kept = new ArrayList<>();
        for (int i = 1;; i++) {
            kept.add(new byte[1 << 20]);
            System.out.println("holding " + i + " MiB");
        }
    }

    static void spin() {
        long x = 0;
        for (;;) x = x * 31 + 7;
    }

    static void serve(String name, int calls) {
        Service s = Service.create();
        s.register(name);
        System.out.println("serving " + name);
        for (int i = 0; i < calls; i++) {
            Request r = s.receive();
            byte[] d = r.data();
            byte[] out = new byte[d.length];
            for (int j = 0; j < d.length; j++) out[j] = d[d.length - 1 - j];
            r.reply(out);
        }
        System.out.println("served " + calls);
    }

    static void call(String name, String text) {
        Portal p = Portal.lookup(name, -1);
        byte[] reply = p.call(text.getBytes(StandardCharsets.UTF_8));
        System.out.println("reply: " + new String(reply, StandardCharsets.UTF_8));
        try {
            Portal.lookup("not-granted", 0);
        } catch (WardenException e) {
            System.out.println("lookup not-granted: " + e.getMessage() + " (" + e.code() + ")");
        }
        p.close();
        try {
            p.call(new byte[1]);
        } catch (WardenException e) {
            System.out.println("call after close: " + e.getMessage() + " (" + e.code() + ")");
        }
    }

    static void family() {
        Task ok = Task.spawn("self", new String[] {"basics", "child"}, 32 << 20, 0);
        System.out.println("child exited " + ok.await(-1));
        Task spinner = Task.spawn("self", new String[] {"spin"}, 8 << 20, 50_000_000L);
        System.out.println("over its cpu limit: " + spinner.await(-1));
        Task victim = Task.spawn("self", new String[] {"spin"}, 8 << 20, 0);
        try {
            victim.await(1_000_000L);
        } catch (WardenException e) {
            System.out.println("await: " + e.getMessage() + " (" + e.code() + ")");
        }
        victim.kill();
        System.out.println("killed: " + victim.await(-1));
        try {
            Task.spawn("self", new String[] {"basics"}, 1L << 40, 0);
        } catch (WardenException e) {
            System.out.println("spawn over budget: " + e.getMessage() + " (" + e.code() + ")");
        }
        try {
            Task.spawn("nothing", new String[0], 1 << 20, 0);
        } catch (WardenException e) {
            System.out.println("spawn unknown: " + e.getMessage() + " (" + e.code() + ")");
        }
    }

    static void supervise() {
        Supervisor sup = new Supervisor(Supervisor.ONE_FOR_ONE, 2, 10_000_000_000L, 1_000_000L);
        sup.spawn(Supervisor.PERMANENT, "self", new String[] {"spin"}, 8 << 20);
        sup.kill(0);
        Supervisor.Event e = sup.await(-1);
        System.out.println("supervised: kind " + e.kind + " status " + e.status + " restarts " + e.restarts);
        sup.spawn(Supervisor.PERMANENT, "self", new String[] {"exit", "3"}, 8 << 20);
        do {
            e = sup.await(-1);
        } while (e.kind == Supervisor.RESTARTED);
        System.out.println("supervised: kind " + e.kind + " member " + e.member + " status " + e.status);
    }

    static void memobj() {
        MemoryObject m = MemoryObject.create(4096);
        m.write(100, "shared bytes".getBytes(StandardCharsets.UTF_8));
        String back = new String(m.read(100, 12), StandardCharsets.UTF_8);
        System.out.println("memory object of " + m.size() + " bytes: " + back);
        try {
            m.read(4090, 100);
            System.out.println("short read allowed");
        } catch (WardenException e) {
            System.out.println("read past the end: " + e.getMessage() + " (" + e.code() + ")");
        }
    }

    static void tcp() {
        Socket listener = Socket.listen("127.0.0.1:0");
        String address = listener.localAddress();
        Socket client = Socket.connect(address, 5_000_000_000L);
        Socket server = listener.accept(5_000_000_000L);
        client.send("ping over tcp".getBytes(StandardCharsets.UTF_8));
        client.shutdown();
        StringBuilder got = new StringBuilder();
        for (;;) {
            byte[] part = server.receive(4, 5_000_000_000L);
            if (part.length == 0) break;
            got.append(new String(part, StandardCharsets.UTF_8));
        }
        server.send("pong".getBytes(StandardCharsets.UTF_8));
        String back = new String(client.receive(16, 5_000_000_000L), StandardCharsets.UTF_8);
        System.out.println("server got: " + got + "; client got: " + back);
        try {
            Socket.connect("127.0.0.2:9", 0);
        } catch (WardenException e) {
            System.out.println("connect outside the grant: " + e.getMessage() + " (" + e.code() + ")");
        }
    }
}
