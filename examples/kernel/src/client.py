"""A Python component using warden:kernel (sdk/wit/kernel.wit): it calls
the echo service a C module serves, shares a memory object, and checks
that the kernel refuses what its grants do not allow, each refusal an
error by name. Prints "python: N checks passed" (or what failed, and
exits non-zero)."""
import sys

from wit_world import exports
from wit_world.imports import errors, ipc, memory
from componentize_py_types import Err


def refused(f):
    """The kernel's error f raised, or None if it did not."""
    try:
        f()
    except Err as e:
        return e.value
    return None


class Run(exports.Run):
    def run(self) -> None:
        failed = []
        checks = 0

        def check(what, ok):
            nonlocal checks
            checks += 1
            if not ok:
                failed.append(what)

        echo = ipc.name_lookup("echo", 10_000_000_000)
        for msg in [b"hello", "héllo ✓".encode(), bytes(range(256)) * 16]:
            check(f"echo of {len(msg)} bytes", ipc.call(echo, msg, -1) == msg)
        check("a name not granted", refused(lambda: ipc.name_lookup("secret", 0)) == errors.Error.DENIED)
        check("a forged portal", refused(lambda: ipc.call(4242, b"x", -1)) == errors.Error.BAD_HANDLE)
        big = b"x" * (64 * 1024 + 1)
        check("a request past max_message_bytes", refused(lambda: ipc.call(echo, big, -1)) == errors.Error.QUOTA)

        obj = memory.mem_create(1 << 20)
        memory.mem_write(obj, 4096, b"shared by handle")
        check("a memory object read back", memory.mem_read(obj, 4096, 16) == b"shared by handle")
        check("its size", memory.mem_size(obj) == 1 << 20)
        view = memory.mem_view(obj, 4096, 16, True)
        check("a read-only view", refused(lambda: memory.mem_write(view, 0, b"x")) == errors.Error.DENIED)
        fresh = memory.mem_revoke(obj)
        check("revoked views", refused(lambda: memory.mem_read(view, 0, 1)) == errors.Error.REVOKED)
        check("the new handle", memory.mem_read(fresh, 4096, 6) == b"shared")

        ipc.call(echo, b"bye", -1)
        if failed:
            print("python: FAILED: " + ", ".join(failed))
            sys.exit(1)
        print(f"python: {checks} checks passed")
