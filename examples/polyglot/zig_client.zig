//! An echo client in Zig: sends argv[1] greetings, checks each echo, says bye.
const std = @import("std");
const warden = @import("warden");

pub fn main() !void {
    const args = try std.process.argsAlloc(std.heap.wasm_allocator);
    const n = if (args.len > 1) try std.fmt.parseInt(u32, args[1], 10) else 3;
    const echo = try warden.lookup("echo", -1);
    var msg: [64]u8 = undefined;
    var reply: [64]u8 = undefined;
    var i: u32 = 0;
    while (i < n) : (i += 1) {
        const req = try std.fmt.bufPrint(&msg, "zig says hello #{d}", .{i});
        const got = try warden.call(echo, req, &reply);
        if (!std.mem.eql(u8, req, got)) return error.BadEcho;
    }
    _ = try warden.call(echo, "bye", &reply);
    var out: [64]u8 = undefined;
    const line = try std.fmt.bufPrint(&out, "zig: {d} echoes checked\n", .{n});
    try std.fs.File.stdout().writeAll(line);
}
