package warden;

import org.teavm.interop.Address;

/**
 * Bytes outside every task's linear memory, shared by handle: one task
 * writes, others read, without copying through messages. Charged to the
 * creator's memory budget; {@link #revoke()} cuts off every other holder.
 */
public final class MemoryObject {
    private final int handle;

    private MemoryObject(int handle) {
        this.handle = handle;
    }

    /** A zeroed object of {@code size} bytes. */
    public static MemoryObject create(long size) {
        return new MemoryObject(Abi.check(Abi.memCreate(size)));
    }

    /** The object granted to this task at spawn, as the {@code index}-th handle. */
    public static MemoryObject granted(int index) {
        return new MemoryObject(Abi.check(Abi.taskGranted(index)));
    }

    /** {@code len} bytes from {@code offset}. */
    public byte[] read(long offset, int len) {
        byte[] out = new byte[len];
        int n = (int) Abi.check(Abi.memRead(handle, offset, Abi.data(out), len));
        if (n == len) {
            return out;
        }
        byte[] part = new byte[n];
        System.arraycopy(out, 0, part, 0, n);
        return part;
    }

    /** Writes {@code data} at {@code offset}. */
    public void write(long offset, byte[] data) {
        Abi.check(Abi.memWrite(handle, offset, Abi.data(data), data.length));
    }

    /** The object's size in bytes. */
    public long size() {
        return Abi.check(Abi.memSize(handle));
    }

    /** A handle to part of the object, read-only if asked. */
    public MemoryObject view(long offset, long len, boolean readOnly) {
        return new MemoryObject(Abi.check(Abi.memView(handle, offset, len, readOnly ? 1 : 0)));
    }

    /** Cuts off every other handle to the object; this one goes on working. */
    public MemoryObject revoke() {
        return new MemoryObject(Abi.check(Abi.memRevoke(handle)));
    }

    /** Closes this handle. */
    public void close() {
        Abi.close(handle);
    }
}
