package warden;

import org.teavm.interop.Address;

/**
 * A block device the manifest grants this task ({@code [[device]]}, and
 * {@code devices = [...]} on the task): whole sectors of
 * {@link #SECTOR} bytes read and written, one holder at a time (see
 * {@code sdk/c/warden.h}). Released when closed or when the task ends.
 */
public final class Device {
    /** Bytes in a sector. */
    public static final int SECTOR = 512;

    private final int handle;

    private Device(int handle) {
        this.handle = handle;
    }

    /**
     * Opens the device {@code name}: throws {@link WardenException#DENIED}
     * unless granted, {@link WardenException#BUSY} while another handle
     * holds it.
     */
    public static Device open(String name) {
        byte[] n = Abi.utf8(name);
        return new Device(Abi.check(Abi.deviceOpen(Abi.data(n), n.length)));
    }

    /** The device's size in sectors. */
    public long sectors() {
        long[] info = new long[2];
        Abi.check(Abi.deviceInfo(handle, Address.ofData(info)));
        return info[1];
    }

    /** Fills {@code buf} (whole sectors, at most 1 MiB) from sector {@code sector} on: the bytes read. */
    public int read(long sector, byte[] buf) {
        int count = count(buf.length);
        return (int) Abi.check(Abi.deviceRead(handle, sector, count, Abi.data(buf), buf.length));
    }

    /** Writes {@code data} (whole sectors, at most 1 MiB) from sector {@code sector} on: the bytes written. */
    public int write(long sector, byte[] data) {
        int count = count(data.length);
        return (int) Abi.check(Abi.deviceWrite(handle, sector, count, Abi.data(data), data.length));
    }

    /** Flushes what was written to the host's storage (fdatasync). */
    public void sync() {
        Abi.check(Abi.deviceSync(handle));
    }

    /** Closes the device, letting another handle open it. */
    public void close() {
        Abi.close(handle);
    }

    private static int count(int len) {
        if (len % SECTOR != 0) {
            throw new WardenException(WardenException.INVALID);
        }
        return len / SECTOR;
    }
}
