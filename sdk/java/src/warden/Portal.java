package warden;

import org.teavm.interop.Address;

/** A capability to call a service: found by name, or received in a message. */
public final class Portal {
    /** Reply bytes taken at most by default; see {@link #capacity(int)}. */
    public static final int DEFAULT_CAPACITY = 64 * 1024;

    private final int handle;
    private byte[] buffer = new byte[DEFAULT_CAPACITY];
    private final int[] count = new int[1];

    Portal(int handle) {
        this.handle = handle;
    }

    /**
     * The portal registered under {@code name}, waiting up to
     * {@code timeoutNanos} for it to appear (negative: for ever; 0: not at
     * all). Throws {@link WardenException#TIMEOUT} if it does not, and
     * {@link WardenException#DENIED} for a name the manifest does not let
     * this task use.
     */
    public static Portal lookup(String name, long timeoutNanos) {
        byte[] n = Abi.utf8(name);
        return new Portal(Abi.check(Abi.nameLookup(Abi.data(n), n.length, timeoutNanos)));
    }

    /** Calls the service and waits for its reply, for ever. */
    public byte[] call(byte[] request) {
        return call(request, -1);
    }

    /**
     * Calls the service and waits up to {@code timeoutNanos} for its reply
     * (negative: for ever). A reply longer than the capacity throws
     * {@link WardenException#QUOTA}.
     */
    public byte[] call(byte[] request, long timeoutNanos) {
        count[0] = 0;
        Address req = Abi.data(request);
        Address resp = Address.ofData(buffer);
        Address nh = Address.ofData(count);
        long n = Abi.callFast(handle, req, request.length, Abi.null_(), 0, resp, buffer.length,
                Abi.null_(), nh);
        if (n == Abi.EAGAIN) {
            n = timeoutNanos < 0
                    ? Abi.call(handle, req, request.length, Abi.null_(), 0, resp, buffer.length,
                            Abi.null_(), nh)
                    : Abi.callTimeout(handle, req, request.length, Abi.null_(), 0, resp,
                            buffer.length, Abi.null_(), nh, timeoutNanos);
        }
        Abi.check(n);
        if (n > buffer.length) {
            throw new WardenException(WardenException.QUOTA,
                    "reply of " + n + " bytes is over the portal's capacity of " + buffer.length);
        }
        byte[] reply = new byte[(int) n];
        System.arraycopy(buffer, 0, reply, 0, (int) n);
        return reply;
    }

    /** The largest reply {@link #call} takes. */
    public void capacity(int bytes) {
        buffer = new byte[bytes];
    }

    /** Closes the portal; the service sees one client fewer. */
    public void close() {
        Abi.close(handle);
    }
}
