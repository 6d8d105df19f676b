//! Zig bindings for Warden guests: `warden.h` through @cImport, plus a few
//! wrappers that turn error codes into Zig errors. Build with the C SDK
//! (its definitions carry the import attributes Zig's translate-c drops):
//!
//!   zig build-exe -target wasm32-wasi -O ReleaseSmall -lc -I sdk/c sdk/c/warden.c \
//!       --dep warden -Mroot=prog.zig -I sdk/c -Mwarden=sdk/zig/warden.zig
//!
//! (as `scripts/guest-build zig prog.zig prog.wasm` does; the C file must
//! come before the -M flags that close its module).

/// Everything `warden.h` declares, under its C names.
pub const c = @cImport({
    @cDefine("WARDEN_NO_DEFINITIONS", "1");
    @cInclude("warden.h");
});

/// A kernel error code, as a Zig error.
pub const Error = error{
    BadHandle,
    Revoked,
    PeerDied,
    NoClients,
    Denied,
    Quota,
    NoMemory,
    BadPointer,
    Timeout,
    Invalid,
    Exists,
    Deadlock,
    Range,
    NoReply,
    Busy,
    Io,
    NotSupported,
    Unknown,
};

/// `r` if it is not an error code.
pub fn check(r: i64) Error!i64 {
    if (r >= 0) return r;
    return switch (r) {
        -1 => Error.BadHandle,
        -2 => Error.Revoked,
        -3 => Error.PeerDied,
        -4 => Error.NoClients,
        -5 => Error.Denied,
        -6 => Error.Quota,
        -7 => Error.NoMemory,
        -8 => Error.BadPointer,
        -9 => Error.Timeout,
        -10 => Error.Invalid,
        -11 => Error.Exists,
        -12 => Error.Deadlock,
        -13 => Error.Range,
        -14 => Error.NoReply,
        -16 => Error.Busy,
        -17 => Error.Io,
        -18 => Error.NotSupported,
        else => Error.Unknown,
    };
}

/// The portal registered under `name`, waiting up to `timeout_ns`
/// (negative: for ever).
pub fn lookup(name: [*:0]const u8, timeout_ns: i64) Error!c.warden_handle {
    return @intCast(try check(c.warden_name_lookup(name, timeout_ns)));
}

/// Calls `portal` with `request`; the reply is the first bytes of `reply`.
pub fn call(portal: c.warden_handle, request: []const u8, reply: []u8) Error![]u8 {
    const n: usize = @intCast(try check(c.warden_call(portal, request.ptr, request.len, null, 0, reply.ptr, reply.len, null, null)));
    if (n > reply.len) return Error.Quota;
    return reply[0..n];
}

/// Bytes in a block device's sector.
pub const sector_size: usize = 512;

/// Opens the block device `name` the manifest grants this task
/// (Error.Denied unless granted, Error.Busy while another handle holds
/// it); close it with c.warden_close.
pub fn deviceOpen(name: [*:0]const u8) Error!c.warden_handle {
    return @intCast(try check(c.warden_device_open(name)));
}

/// The device's size in sectors.
pub fn deviceSectors(dev: c.warden_handle) Error!u64 {
    var info: c.warden_device_info_t = undefined;
    _ = try check(c.warden_device_info(dev, &info));
    return info.sectors;
}

/// Fills `buf` (whole sectors, at most 1 MiB) from sector `sector` on:
/// the bytes read.
pub fn deviceRead(dev: c.warden_handle, sector: u64, buf: []u8) Error!usize {
    if (buf.len % sector_size != 0) return Error.Invalid;
    const count: u32 = @intCast(buf.len / sector_size);
    return @intCast(try check(c.warden_device_read(dev, sector, count, buf.ptr, buf.len)));
}

/// Writes `data` (whole sectors, at most 1 MiB) from sector `sector` on:
/// the bytes written.
pub fn deviceWrite(dev: c.warden_handle, sector: u64, data: []const u8) Error!usize {
    if (data.len % sector_size != 0) return Error.Invalid;
    const count: u32 = @intCast(data.len / sector_size);
    return @intCast(try check(c.warden_device_write(dev, sector, count, data.ptr, data.len)));
}

/// Flushes what was written to the host's storage (fdatasync).
pub fn deviceSync(dev: c.warden_handle) Error!void {
    _ = try check(c.warden_device_sync(dev));
}
