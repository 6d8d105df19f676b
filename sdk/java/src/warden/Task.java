package warden;

import org.teavm.interop.Address;

/**
 * A child task: spawned from a module the manifest granted this task
 * ({@code modules = { worker = "worker.wasm" }}), with a memory and CPU
 * budget carved from this task's own.
 */
public final class Task {
    /** {@link #await} of a child that trapped. */
    public static final int TRAPPED = -1;
    /** {@link #await} of a child that was killed. */
    public static final int KILLED = -2;

    private final int handle;

    private Task(int handle) {
        this.handle = handle;
    }

    /**
     * Starts the granted module {@code module} with {@code args}, a memory
     * limit in bytes (taken from this task's budget while the child lives)
     * and a CPU limit in nanoseconds (0: none of its own).
     */
    public static Task spawn(String module, String[] args, long memoryLimit, long cpuLimitNanos) {
        int m = lookup(module);
        try {
            byte[][] words = new byte[args.length][];
            int[] argv = argv(args, words);
            // warden_budget: memory_limit, cpu_limit_ns, cpu_share (1), padding.
            long[] budget = {memoryLimit, cpuLimitNanos, 1};
            return new Task(Abi.check(Abi.taskSpawn(m, Address.ofData(argv), args.length,
                    Address.ofData(budget), Abi.null_(), 0)));
        } finally {
            Abi.close(m);
        }
    }

    /** A handle to the granted module {@code module}. */
    static int lookup(String module) {
        byte[] name = Abi.utf8(module);
        return Abi.check(Abi.moduleLookup(Abi.data(name), name.length));
    }

    /**
     * The addresses of {@code args} as NUL-terminated UTF-8, kept in
     * {@code words} (which must outlive the call they are passed to).
     */
    static int[] argv(String[] args, byte[][] words) {
        int[] argv = new int[Math.max(args.length, 1)];
        for (int i = 0; i < args.length; i++) {
            byte[] w = Abi.utf8(args[i]);
            words[i] = new byte[w.length + 1];
            System.arraycopy(w, 0, words[i], 0, w.length);
            argv[i] = Address.ofData(words[i]).toInt();
        }
        return argv;
    }

    /**
     * Waits up to {@code timeoutNanos} (negative: for ever) for the child to
     * end: its exit code, or {@link #TRAPPED} or {@link #KILLED}. Throws
     * {@link WardenException#TIMEOUT} if it is still running.
     */
    public int await(long timeoutNanos) {
        int[] status = new int[1];
        Abi.check(Abi.taskWait(handle, timeoutNanos, Address.ofData(status)));
        return status[0];
    }

    /** Kills the child and its own children; every resource they held returns. */
    public void kill() {
        Abi.check(Abi.taskKill(handle));
    }

    /**
     * Ends this task with exit code {@code code} (TeaVM's WASI runtime has
     * no {@code System.exit}).
     */
    public static void exit(int code) {
        Abi.procExit(code);
    }

    /**
     * Blocks this task for {@code nanos} without using CPU. (TeaVM's
     * {@code Thread.sleep} needs its coroutine runtime, which a WASI module
     * does not have.)
     */
    public static void sleep(long nanos) {
        // One relative monotonic-clock subscription (48 bytes), then its
        // event (32 bytes) and the count, at an 8-aligned address: WASI
        // checks the alignment, and TeaVM's arrays are only 4-aligned.
        long[] buffer = new long[13];
        Address sub = Address.align(Address.ofData(buffer), 8);
        sub.add(8).putLong(0); // tag 0: clock
        sub.add(16).putLong(1); // clock id: monotonic
        sub.add(24).putLong(nanos);
        Address event = sub.add(48);
        Address count = sub.add(80);
        Abi.pollOneoff(sub, event, 1, count);
    }

    /**
     * The value of this task's environment variable {@code name} (set by
     * the manifest's {@code env = { NAME = "value" }} or by {@code warden
     * run --env}), or null if it has none. TeaVM's {@code System.getenv}
     * returns null for every name under WASI; this reads WASI's
     * environment directly.
     */
    public static String env(String name) {
        byte[] key = Abi.utf8(name + "=");
        int[] sizes = new int[2];
        Address sizesAt = Address.ofData(sizes);
        if (Abi.environSizesGet(sizesAt, sizesAt.add(4)) != 0) {
            return null;
        }
        int[] starts = new int[Math.max(sizes[0], 1)];
        byte[] bytes = new byte[Math.max(sizes[1], 1)];
        if (Abi.environGet(Address.ofData(starts), Address.ofData(bytes)) != 0) {
            return null;
        }
        // The host wrote addresses; turn them into offsets in bytes before
        // anything else is allocated.
        int base = Address.ofData(bytes).toInt();
        for (int i = 0; i < sizes[0]; i++) {
            int at = starts[i] - base;
            if (startsWith(bytes, at, key)) {
                int end = at + key.length;
                while (end < bytes.length && bytes[end] != 0) {
                    end++;
                }
                return new String(bytes, at + key.length, end - at - key.length,
                        java.nio.charset.StandardCharsets.UTF_8);
            }
        }
        return null;
    }

    private static boolean startsWith(byte[] bytes, int at, byte[] key) {
        if (at < 0 || at + key.length > bytes.length) {
            return false;
        }
        for (int i = 0; i < key.length; i++) {
            if (bytes[at + i] != key[i]) {
                return false;
            }
        }
        return true;
    }
}
