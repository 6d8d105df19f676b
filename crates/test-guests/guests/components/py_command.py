"""A wasi:cli/command component in Python (componentize-py), for the
component tests:

  py_command hello          print its arguments and $GREETING, copy
                            /data/in.txt to /data/out.txt if there is one
  py_command stdin          print how many bytes its standard input held
  py_command alloc          allocate 1 MiB blocks until MemoryError, then
                            print how many it got and exit 0
  py_command spin           loop for ever (for CPU limits and kills)
  py_command exit N         exit with status N
"""
import os
import sys

from wit_world import exports


def hello(args):
    print("hello from python", args, os.environ.get("GREETING"))
    try:
        with open("/data/in.txt") as f:
            text = f.read()
    except OSError as e:
        print("no input:", e.strerror)
        return
    with open("/data/out.txt", "w") as f:
        f.write(text.upper())
    print("copied", len(text), "characters")


def alloc():
    blocks = []
    try:
        while True:
            blocks.append(bytearray(1 << 20))
    except MemoryError:
        pass
    print("allocated", len(blocks), "blocks of 1 MiB")


def spin():
    n = 0
    while True:
        n += 1


class Run(exports.Run):
    def run(self) -> None:
        args = sys.argv[1:]
        mode = args[0] if args else "hello"
        if mode == "hello":
            hello(args)
        elif mode == "stdin":
            print("read", len(sys.stdin.buffer.read()), "bytes")
        elif mode == "alloc":
            alloc()
        elif mode == "spin":
            spin()
        elif mode == "exit":
            sys.stdout.flush()
            os._exit(int(args[1]))
        else:
            print("unknown mode", mode)
