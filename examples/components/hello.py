"""A Python program as a WASI 0.2 command component (componentize-py):
it greets whoever its arguments name and counts the lines of the files
it is given, under the directory its manifest grants it."""
import sys

from wit_world import exports


class Run(exports.Run):
    def run(self) -> None:
        names = [a for a in sys.argv[1:] if not a.startswith("/")]
        print("hello from Python,", ", ".join(names) or "world")
        for path in (a for a in sys.argv[1:] if a.startswith("/")):
            with open(path) as f:
                print(path, "has", sum(1 for _ in f), "lines")
