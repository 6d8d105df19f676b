package warden;

import java.nio.charset.StandardCharsets;
import org.teavm.interop.Address;
import org.teavm.interop.Import;

/**
 * The raw host functions of the {@code warden} import module (the same
 * functions, in the same order of arguments, as {@code sdk/c/warden.h}),
 * and the little glue the public classes share. Pointers are addresses in
 * the task's linear memory: the data of a Java array, which cannot move
 * while a host function runs (nothing else runs then).
 */
final class Abi {
    private Abi() {}

    static final int EAGAIN = -15;

    @Import(module = "warden", name = "close")
    static native int close(int h);

    @Import(module = "warden", name = "service_create")
    static native int serviceCreate();

    @Import(module = "warden", name = "portal_create")
    static native int portalCreate(int service);

    @Import(module = "warden", name = "call")
    static native long call(int portal, Address req, int reqLen, Address reqH, int reqNh,
            Address resp, int respCap, Address respH, Address respNh);

    @Import(module = "warden", name = "call_fast")
    static native long callFast(int portal, Address req, int reqLen, Address reqH, int reqNh,
            Address resp, int respCap, Address respH, Address respNh);

    @Import(module = "warden", name = "call_timeout")
    static native long callTimeout(int portal, Address req, int reqLen, Address reqH, int reqNh,
            Address resp, int respCap, Address respH, Address respNh, long timeoutNs);

    @Import(module = "warden", name = "recv")
    static native long recv(int service, Address callId, Address buf, int cap, Address h, Address nh);

    @Import(module = "warden", name = "reply")
    static native int reply(long callId, Address resp, int len, Address h, int nh);

    @Import(module = "warden", name = "call_origin")
    static native int callOrigin(long callId, Address buf, int cap);

    @Import(module = "warden", name = "name_register")
    static native int nameRegister(Address name, int len, int portal);

    @Import(module = "warden", name = "name_lookup")
    static native int nameLookup(Address name, int len, long timeoutNs);

    @Import(module = "warden", name = "mem_create")
    static native int memCreate(long size);

    @Import(module = "warden", name = "mem_view")
    static native int memView(int mem, long offset, long len, int readonly);

    @Import(module = "warden", name = "mem_read")
    static native long memRead(int mem, long offset, Address dst, int len);

    @Import(module = "warden", name = "mem_write")
    static native long memWrite(int mem, long offset, Address src, int len);

    @Import(module = "warden", name = "mem_size")
    static native long memSize(int mem);

    @Import(module = "warden", name = "mem_revoke")
    static native int memRevoke(int mem);

    @Import(module = "warden", name = "permit_grant")
    static native int permitGrant(Address ptr, int len, int writable);

    @Import(module = "warden", name = "permit_read")
    static native long permitRead(int permit, long offset, Address dst, int len);

    @Import(module = "warden", name = "permit_write")
    static native long permitWrite(int permit, long offset, Address src, int len);

    @Import(module = "warden", name = "permit_revoke")
    static native int permitRevoke(int permit);

    @Import(module = "warden", name = "module_lookup")
    static native int moduleLookup(Address name, int len);

    @Import(module = "warden", name = "task_spawn")
    static native int taskSpawn(int module, Address argv, int argc, Address budget, Address grant,
            int ngrant);

    @Import(module = "warden", name = "task_kill")
    static native int taskKill(int task);

    @Import(module = "warden", name = "supervisor_create")
    static native int supervisorCreate(Address spec);

    @Import(module = "warden", name = "supervisor_spawn")
    static native int supervisorSpawn(int sup, int restart, int module, Address argv, int argc,
            Address budget, Address grant, int ngrant);

    @Import(module = "warden", name = "supervisor_wait")
    static native int supervisorWait(int sup, long timeoutNs, Address event);

    @Import(module = "warden", name = "supervisor_child")
    static native int supervisorChild(int sup, int member);

    @Import(module = "warden", name = "task_wait")
    static native int taskWait(int task, long timeoutNs, Address status);

    @Import(module = "warden", name = "task_granted")
    static native int taskGranted(int index);

    @Import(module = "warden", name = "tcp_listen")
    static native int tcpListen(Address addr, int len);

    @Import(module = "warden", name = "tcp_accept")
    static native int tcpAccept(int listener, long timeoutNs);

    @Import(module = "warden", name = "tcp_connect")
    static native int tcpConnect(Address addr, int len, long timeoutNs);

    @Import(module = "warden", name = "sock_send")
    static native long sockSend(int sock, Address buf, int len, long timeoutNs);

    @Import(module = "warden", name = "sock_recv")
    static native long sockRecv(int sock, Address buf, int cap, long timeoutNs);

    @Import(module = "warden", name = "sock_shutdown")
    static native int sockShutdown(int sock);

    @Import(module = "warden", name = "sock_addr")
    static native int sockAddr(int sock, int peer, Address buf, int cap);

    @Import(module = "warden", name = "device_open")
    static native int deviceOpen(Address name, int len);

    @Import(module = "warden", name = "device_info")
    static native int deviceInfo(int dev, Address info);

    @Import(module = "warden", name = "device_read")
    static native long deviceRead(int dev, long sector, int count, Address buf, int cap);

    @Import(module = "warden", name = "device_write")
    static native long deviceWrite(int dev, long sector, int count, Address buf, int len);

    @Import(module = "warden", name = "device_sync")
    static native int deviceSync(int dev);

    @Import(module = "wasi_snapshot_preview1", name = "poll_oneoff")
    static native int pollOneoff(Address subscriptions, Address events, int n, Address nevents);

    @Import(module = "wasi_snapshot_preview1", name = "environ_sizes_get")
    static native int environSizesGet(Address count, Address bytes);

    @Import(module = "wasi_snapshot_preview1", name = "environ_get")
    static native int environGet(Address pointers, Address bytes);

    @Import(module = "wasi_snapshot_preview1", name = "proc_exit")
    static native void procExit(int code);

    /** {@code r} if it is not an error code; else throws. */
    static long check(long r) {
        if (r < 0) {
            throw new WardenException((int) r);
        }
        return r;
    }

    static int check(int r) {
        if (r < 0) {
            throw new WardenException(r);
        }
        return r;
    }

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static Address data(byte[] a) {
        return a.length == 0 ? Address.fromInt(0) : Address.ofData(a);
    }

    static Address null_() {
        return Address.fromInt(0);
    }
}
