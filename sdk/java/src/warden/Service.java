package warden;

import org.teavm.interop.Address;

/**
 * A service this task serves: calls made through its portals queue here
 * until {@link #receive()} takes them.
 *
 * <pre>
 *   Service s = Service.create();
 *   s.register("echo");
 *   for (;;) { Request r = s.receive(); r.reply(r.data()); }
 * </pre>
 */
public final class Service {
    /** Request bytes received at most; the task's {@code max_message_bytes} default. */
    public static final int DEFAULT_CAPACITY = 64 * 1024;

    private final int handle;
    private byte[] buffer = new byte[DEFAULT_CAPACITY];
    private final long[] callId = new long[1];
    private final int[] handles = new int[1];

    private Service(int handle) {
        this.handle = handle;
    }

    /** A new service, with no portal yet. */
    public static Service create() {
        return new Service(Abi.check(Abi.serviceCreate()));
    }

    /** Publishes a portal to this service under {@code name} (the manifest's {@code provides}). */
    public void register(String name) {
        int portal = Abi.check(Abi.portalCreate(handle));
        byte[] n = Abi.utf8(name);
        int r = Abi.nameRegister(Abi.data(n), n.length, portal);
        Abi.close(portal);
        Abi.check(r);
    }

    /** A new portal to this service, to hand to another task in a message. */
    public Portal portal() {
        return new Portal(Abi.check(Abi.portalCreate(handle)));
    }

    /** The largest request {@link #receive()} takes (64 KiB unless set). */
    public void capacity(int bytes) {
        buffer = new byte[bytes];
    }

    /**
     * Waits for the next call. A request longer than the capacity (which
     * arrives cut short) gets an empty reply, and the wait goes on.
     * Throws {@link WardenException#NO_CLIENTS} once no portal to the
     * service is left anywhere.
     */
    public Request receive() {
        for (;;) {
            handles[0] = 0;
            long n = Abi.check(Abi.recv(handle, Address.ofData(callId), Address.ofData(buffer),
                    buffer.length, Abi.null_(), Address.ofData(handles)));
            if (n > buffer.length) {
                Abi.reply(callId[0], Abi.null_(), 0, Abi.null_(), 0);
                continue;
            }
            byte[] data = new byte[(int) n];
            System.arraycopy(buffer, 0, data, 0, (int) n);
            return new Request(callId[0], data);
        }
    }

    /** Closes this handle to the service. */
    public void close() {
        Abi.close(handle);
    }
}
