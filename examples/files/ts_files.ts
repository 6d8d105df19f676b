// Files in AssemblyScript, which has no file library: it calls WASI
// preview 1 itself (path_open, fd_write, fd_read on /data, its first
// preopened directory) and knows nothing of Warden.

@external("wasi_snapshot_preview1", "path_open")
declare function path_open(fd: u32, dirflags: u32, path: usize, len: usize, oflags: u16,
  base: u64, inheriting: u64, fdflags: u16, opened: usize): u16;
@external("wasi_snapshot_preview1", "fd_write")
declare function fd_write(fd: u32, iovs: usize, n: usize, written: usize): u16;
@external("wasi_snapshot_preview1", "fd_read")
declare function fd_read(fd: u32, iovs: usize, n: usize, read: usize): u16;
@external("wasi_snapshot_preview1", "fd_close")
declare function fd_close(fd: u32): u16;

const DATA: u32 = 3; // the first preopened directory: /data
const CREAT: u16 = 1, TRUNC: u16 = 8;
const READ: u64 = 1 << 1, WRITE: u64 = 1 << 6;

function open(name: string, oflags: u16, rights: u64): u32 {
  const path = String.UTF8.encode(name);
  const out = new ArrayBuffer(4);
  const e = path_open(DATA, 0, changetype<usize>(path), path.byteLength, oflags, rights, 0, 0,
    changetype<usize>(out));
  if (e != 0) abort("path_open " + name + ": errno " + e.toString());
  return load<u32>(changetype<usize>(out));
}

// fd_write or fd_read of `buf` on `fd`: the count moved.
function move(fd: u32, buf: ArrayBuffer, writing: bool): u32 {
  const iov = new ArrayBuffer(8);
  store<u32>(changetype<usize>(iov), changetype<u32>(buf));
  store<u32>(changetype<usize>(iov) + 4, buf.byteLength);
  const n = new ArrayBuffer(4);
  const e = writing
    ? fd_write(fd, changetype<usize>(iov), 1, changetype<usize>(n))
    : fd_read(fd, changetype<usize>(iov), 1, changetype<usize>(n));
  if (e != 0) abort(`${writing ? "fd_write" : "fd_read"}: errno ${e}`);
  return load<u32>(changetype<usize>(n));
}

const text = "written by assemblyscript\n";
let fd = open("assemblyscript.txt", CREAT | TRUNC, WRITE);
move(fd, String.UTF8.encode(text), true);
fd_close(fd);
fd = open("assemblyscript.txt", 0, READ);
const buf = new ArrayBuffer(64);
const n = move(fd, buf, false);
fd_close(fd);
if (String.UTF8.decode(buf.slice(0, n)) != text) abort("bad read back");
process.stdout.write("assemblyscript: wrote and read back /data/assemblyscript.txt\n");
