package warden;

import java.nio.charset.StandardCharsets;
import org.teavm.interop.Address;

/** A call received by a {@link Service}, waiting for its reply. */
public final class Request {
    private final long callId;
    private final byte[] data;

    Request(long callId, byte[] data) {
        this.callId = callId;
        this.data = data;
    }

    /** The request's bytes. */
    public byte[] data() {
        return data;
    }

    /** Answers the call; the caller's {@link Portal#call} returns {@code response}. */
    public void reply(byte[] response) {
        Abi.check(Abi.reply(callId, Abi.data(response), response.length, Abi.null_(), 0));
    }

    /** Who made the call: {@code "node/task"} (the node is empty outside a cluster). */
    public String origin() {
        byte[] buf = new byte[128];
        int n = Abi.check(Abi.callOrigin(callId, Address.ofData(buf), buf.length));
        return new String(buf, 0, Math.min(n, buf.length), StandardCharsets.UTF_8);
    }
}
