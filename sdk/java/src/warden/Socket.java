package warden;

import java.nio.charset.StandardCharsets;
import org.teavm.interop.Address;

/**
 * A TCP listener or connection: a handle, at the addresses the manifest
 * grants ({@code listen = [...]}, {@code connect = [...]}; anything else is
 * {@link WardenException#DENIED}). Timeouts are in nanoseconds: 0 does not
 * wait, negative waits for ever.
 */
public final class Socket {
    private final int handle;

    private Socket(int handle) {
        this.handle = handle;
    }

    /** A listener on {@code address} ("127.0.0.1:8080"; port 0 picks one). */
    public static Socket listen(String address) {
        byte[] a = Abi.utf8(address);
        return new Socket(Abi.check(Abi.tcpListen(Abi.data(a), a.length)));
    }

    /** A connection to {@code address}. */
    public static Socket connect(String address, long timeoutNanos) {
        byte[] a = Abi.utf8(address);
        return new Socket(Abi.check(Abi.tcpConnect(Abi.data(a), a.length, timeoutNanos)));
    }

    /** The next connection to this listener. */
    public Socket accept(long timeoutNanos) {
        return new Socket(Abi.check(Abi.tcpAccept(handle, timeoutNanos)));
    }

    /** Sends all of {@code data}, waiting as long as it takes. */
    public void send(byte[] data) {
        int sent = 0;
        while (sent < data.length) {
            sent += (int) Abi.check(Abi.sockSend(handle, Address.ofData(data).add(sent),
                    data.length - sent, -1));
        }
    }

    /**
     * Up to {@code max} bytes, waiting up to {@code timeoutNanos} for some;
     * an empty array once the peer has closed its side.
     */
    public byte[] receive(int max, long timeoutNanos) {
        byte[] buf = new byte[max];
        int n = (int) Abi.check(Abi.sockRecv(handle, Abi.data(buf), max, timeoutNanos));
        if (n == max) {
            return buf;
        }
        byte[] out = new byte[n];
        System.arraycopy(buf, 0, out, 0, n);
        return out;
    }

    /** No more sends: the peer reads the end of the stream. */
    public void shutdown() {
        Abi.check(Abi.sockShutdown(handle));
    }

    /** This end's address, as text ("127.0.0.1:40123"). */
    public String localAddress() {
        return address(0);
    }

    /** The other end's address, as text. */
    public String peerAddress() {
        return address(1);
    }

    private String address(int peer) {
        byte[] buf = new byte[64];
        int n = Abi.check(Abi.sockAddr(handle, peer, Address.ofData(buf), buf.length));
        return new String(buf, 0, Math.min(n, buf.length), StandardCharsets.UTF_8);
    }

    /** Closes the socket. */
    public void close() {
        Abi.close(handle);
    }
}
