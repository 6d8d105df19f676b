"""A wasi:cli/command component in Python (componentize-py), for the
component tests:

  py_command hello          print its arguments and $GREETING, copy
                            /data/in.txt to /data/out.txt if there is one
  py_command stdin          print how many bytes its standard input held
  py_command alloc          allocate 1 MiB blocks until MemoryError, then
                            print how many it got and exit 0
  py_command spin           loop for ever (for CPU limits and kills)
  py_command exit N         exit with status N
  py_command reach ADDR…    try a TCP connection to each HOST:PORT, print
                            "reach ADDR: ok" or "reach ADDR: ERRNO"
  py_command echo ADDR MSG  send MSG to ADDR, close the sending side,
                            print what comes back
  py_command sockets ADDR N open up to N connections to ADDR at once,
                            print how many opened and why it stopped
  py_command listen N       listen on 127.0.0.1 (any port), print
                            "listening ADDR", echo N connections
  py_command listeners N    open up to N listeners on 127.0.0.1, print
                            "listeners K: ERRNO" (or "listeners K"),
                            then hold them for ever
  py_command send ADDR N    send N bytes to ADDR, print how long it took
  py_command recv ADDR      read ADDR until its end, print the count
  py_command lookup NAME    print the addresses NAME resolves to
  py_command bound ADDR     bind to 127.0.0.1 (any port), then connect to
                            ADDR from there: "bound: ok" or "bound: ERRNO"
  py_command halfclose ADDR send "ping" to an echo server at ADDR, and once
                            its answer is waiting shut the receiving side
                            (what recv gets then) and the sending side
                            (what send gets then)
  py_command flush ADDR N   with a small send buffer, send N bytes without
                            waiting and shut the sending side at once;
                            print how many send took
  py_command udp ADDR       send a datagram to ADDR, print "udp: ok" or
                            "udp: ERRNO"
"""
import encodings.idna  # noqa: F401 (for host names; the stripped library lacks it)
import errno
import os
import socket
import sys
import time

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


def addr_of(text):
    host, port = text.rsplit(":", 1)
    return host.strip("[]"), int(port)


def connect(target):
    host, port = addr_of(target)
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    s.connect((host, port))
    return s


def why(e):
    return errno.errorcode.get(e.errno, str(e)) if e.errno else str(e)


def reach(targets):
    for t in targets:
        try:
            s = connect(t)
            s.close()
            print("reach", t + ": ok", flush=True)
        except OSError as e:
            print("reach", t + ":", why(e), flush=True)


def echo(target, msg):
    s = connect(target)
    s.sendall(msg.encode())
    s.shutdown(socket.SHUT_WR)
    back = b""
    while True:
        got = s.recv(65536)
        if not got:
            break
        back += got
    print("echoed:", back.decode(), flush=True)


def sockets(target, n):
    held = []
    try:
        for _ in range(n):
            held.append(connect(target))
        print("opened", len(held), flush=True)
    except OSError as e:
        print("opened %d: %s" % (len(held), why(e)), flush=True)


def listen(n):
    srv = socket.socket()
    try:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
    except OSError as e:
        print("listen:", why(e), flush=True)
        return
    host, port = srv.getsockname()[:2]
    print("listening %s:%d" % (host, port), flush=True)
    for _ in range(n):
        conn, _peer = srv.accept()
        while True:
            got = conn.recv(65536)
            if not got:
                break
            conn.sendall(got)
        conn.close()
    print("served", n, flush=True)


def listeners(n):
    held = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            s.listen()
            held.append(s)
        print("listeners", len(held), flush=True)
    except OSError as e:
        print("listeners %d: %s" % (len(held), why(e)), flush=True)
    while True:
        time.sleep(3600)


def send(target, n):
    s = connect(target)
    block = b"x" * 65536
    start = time.monotonic()
    left = n
    while left > 0:
        left -= s.send(block[: min(left, len(block))])
    s.close()
    print("sent %d in %.2f s" % (n, time.monotonic() - start), flush=True)


def recv(target):
    s = connect(target)
    n = 0
    while True:
        got = s.recv(65536)
        if not got:
            break
        n += len(got)
    print("received", n, flush=True)


def bound(target):
    try:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.connect(addr_of(target))
        s.close()
        print("bound: ok", flush=True)
    except OSError as e:
        print("bound:", why(e), flush=True)


def halfclose(target):
    import select
    s = connect(target)
    s.sendall(b"ping")
    select.select([s], [], [])
    s.shutdown(socket.SHUT_RD)
    print("recv after shutdown(RD):", len(s.recv(10)), "bytes", flush=True)
    s.shutdown(socket.SHUT_WR)
    try:
        s.send(b"x")
        print("send after shutdown(WR): ok", flush=True)
    except OSError as e:
        print("send after shutdown(WR):", why(e), flush=True)


def flush(target, n):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    s.connect(addr_of(target))
    s.setblocking(False)  # a blocking send waits until all has left
    sent = s.send(b"x" * n)
    s.shutdown(socket.SHUT_WR)
    print("sent", sent, flush=True)


def udp(target):
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.sendto(b"datagram", addr_of(target))
        print("udp: ok", flush=True)
    except OSError as e:
        print("udp:", why(e), flush=True)


def lookup(name):
    try:
        found = sorted({a[4][0] for a in socket.getaddrinfo(name, 80)})
        print("lookup", name + ":", " ".join(found), flush=True)
    except OSError as e:
        print("lookup", name + ": failed", e, flush=True)


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
        elif mode == "reach":
            reach(args[1:])
        elif mode == "echo":
            echo(args[1], args[2])
        elif mode == "sockets":
            sockets(args[1], int(args[2]))
        elif mode == "listen":
            listen(int(args[1]))
        elif mode == "listeners":
            listeners(int(args[1]))
        elif mode == "send":
            send(args[1], int(args[2]))
        elif mode == "recv":
            recv(args[1])
        elif mode == "bound":
            bound(args[1])
        elif mode == "halfclose":
            halfclose(args[1])
        elif mode == "flush":
            flush(args[1], int(args[2]))
        elif mode == "udp":
            udp(args[1])
        elif mode == "lookup":
            lookup(args[1])
        elif mode == "exit":
            sys.stdout.flush()
            os._exit(int(args[1]))
        else:
            print("unknown mode", mode)
