//! Files in Zig, with `std.fs` only: writes /data/zig.txt, reads it
//! back. Knows nothing of Warden. (On WASI, Zig's working directory is
//! the first preopened directory, here `/data`.)
const std = @import("std");

pub fn main() !void {
    const text = "written by zig\n";
    {
        const f = try std.fs.cwd().createFile("zig.txt", .{});
        defer f.close();
        try f.writeAll(text);
    }
    var buf: [64]u8 = undefined;
    const f = try std.fs.cwd().openFile("zig.txt", .{});
    defer f.close();
    const n = try f.read(&buf);
    if (!std.mem.eql(u8, buf[0..n], text)) return error.BadReadBack;
    try std.fs.File.stdout().writeAll("zig: wrote and read back /data/zig.txt\n");
}
