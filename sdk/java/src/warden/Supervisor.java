package warden;

import org.teavm.interop.Address;

/**
 * A supervisor of this task's children, as OTP's (see {@code warden.h}):
 * children spawned into it are restarted, by their restart policy and its
 * strategy, within its intensity. Restarts are made, and paid for, in this
 * task's {@link #await}; each run's memory is carved from its budget.
 */
public final class Supervisor {
    /** Strategies: restart the child that ended; every child; it and those after it. */
    public static final int ONE_FOR_ONE = 0, ONE_FOR_ALL = 1, REST_FOR_ONE = 2;
    /** Restart policies: whenever it ends; when it fails; never. */
    public static final int PERMANENT = 0, TRANSIENT = 1, TEMPORARY = 2;
    /** Report kinds: restarted; ended for good; gave up (every child killed). */
    public static final int RESTARTED = 1, ENDED = 2, GAVE_UP = 3;

    /** What {@link #await} reports. */
    public static final class Event {
        public final int kind, member, status, restarts;

        Event(int[] e) {
            kind = e[0];
            member = e[1];
            status = e[2];
            restarts = e[3];
        }
    }

    private final int handle;

    /**
     * A supervisor with {@code strategy}, allowing {@code maxRestarts}
     * restarts in any {@code withinNanos}, each after {@code backoffNanos}
     * doubling within the window.
     */
    public Supervisor(int strategy, int maxRestarts, long withinNanos, long backoffNanos) {
        // warden_supervisor_spec: strategy, max_restarts (u32 each), within_ns, backoff_ns.
        long[] spec = {(strategy & 0xffffffffL) | ((long) maxRestarts << 32), withinNanos, backoffNanos};
        handle = Abi.check(Abi.supervisorCreate(Address.ofData(spec)));
    }

    /**
     * Spawns the granted module {@code module} with {@code args} as a child
     * with {@code restart} and a memory limit in bytes; its member index.
     */
    public int spawn(int restart, String module, String[] args, long memoryLimit) {
        int m = Task.lookup(module);
        try {
            byte[][] words = new byte[args.length][];
            int[] argv = Task.argv(args, words);
            long[] budget = {memoryLimit, 0, 1};
            return Abi.check(Abi.supervisorSpawn(handle, restart, m, Address.ofData(argv), args.length,
                    Address.ofData(budget), Abi.null_(), 0));
        } finally {
            Abi.close(m);
        }
    }

    /**
     * Waits up to {@code timeoutNanos} (negative: for ever) for the next end
     * among the children and deals with it. Throws
     * {@link WardenException#TIMEOUT} if nothing happened, and
     * {@code PEER_DIED} once it has given up.
     */
    public Event await(long timeoutNanos) {
        int[] e = new int[4];
        Abi.check(Abi.supervisorWait(handle, timeoutNanos, Address.ofData(e)));
        return new Event(e);
    }

    /** Kills member {@code member}'s current run (its supervisor may restart it). */
    public void kill(int member) {
        int run = Abi.check(Abi.supervisorChild(handle, member));
        try {
            Abi.check(Abi.taskKill(run));
        } finally {
            Abi.close(run);
        }
    }
}
