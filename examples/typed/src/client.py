"""A Python client of the example store (componentize-py): a command
component importing example:kv/store, bound to the server task by the
manifest. Every value it passes is copied into the server's memory and
every answer back into its own; it checks each one and prints
"python: N checks passed" (or what failed, and exits non-zero)."""
import sys

from wit_world import exports
from wit_world.imports import store
from componentize_py_types import Err

ME = "python/"


class Run(exports.Run):
    def run(self) -> None:
        failed = []

        def check(what, ok):
            if not ok:
                failed.append(what)

        check("set a new key", store.set(ME + "greeting", "hello from Python") is True)
        check("set it again", store.set(ME + "greeting", "héllo, wörld ✓") is False)
        check("get it back", store.get(ME + "greeting") == "héllo, wörld ✓")
        check("get a missing key", store.get(ME + "nothing") is None)
        big = "x" * 20000
        store.set(ME + "big", big)
        check("a 20 kB value round trip", store.get(ME + "big") == big)
        for i in range(50):
            store.set(f"{ME}n{i:02}", str(i * i))
        listed = store.entries(ME + "n")
        check("50 entries, in order", [e.key for e in listed] == [f"{ME}n{i:02}" for i in range(50)])
        check("their values", [e.value for e in listed] == [str(i * i) for i in range(50)])
        check("take a key", store.take(ME + "n07") == "49")
        try:
            store.take(ME + "n07")
            check("take it twice", False)
        except Err as e:
            check("take it twice: missing", e.value == store.Error.MISSING)
        check("gone after take", store.get(ME + "n07") is None)
        check("49 left", len(store.entries(ME + "n")) == 49)
        checks = 12
        if failed:
            print("python: checks FAILED:", ", ".join(failed))
            sys.exit(1)
        print(f"python: {checks} checks passed")
