//! A block device from Zig: writes four sectors, syncs, reads them back,
//! and checks what the kernel refuses (a second holder, sectors past the
//! end, a part of a sector).
const std = @import("std");
const warden = @import("warden");
const sector = warden.sector_size;

pub fn main() !void {
    const args = try std.process.argsAlloc(std.heap.wasm_allocator);
    const name = if (args.len > 1) args[1] else "disk";
    const disk = try warden.deviceOpen(name);
    const sectors = try warden.deviceSectors(disk);
    var data = [_]u8{0} ** (4 * sector);
    for (0..4) |i| {
        _ = try std.fmt.bufPrint(data[i * sector ..], "zig sector {d}\n", .{2 + i});
    }
    if (try warden.deviceWrite(disk, 2, &data) != data.len) return error.ShortWrite;
    try warden.deviceSync(disk);
    var back = [_]u8{0} ** (4 * sector);
    if (try warden.deviceRead(disk, 2, &back) != back.len) return error.ShortRead;
    if (!std.mem.eql(u8, &data, &back)) return error.ReadBackDiffers;
    if (warden.deviceOpen(name)) |_| return error.SecondHolder else |e| if (e != warden.Error.Busy) return e;
    if (warden.deviceRead(disk, sectors - 1, back[0 .. 2 * sector])) |_| return error.PastTheEnd else |e| if (e != warden.Error.Range) return e;
    if (warden.deviceRead(disk, 0, back[0..100])) |_| return error.PartSector else |e| if (e != warden.Error.Invalid) return e;
    var out: [64]u8 = undefined;
    const line = try std.fmt.bufPrint(&out, "zig: device checked, {d} sectors\n", .{sectors});
    try std.fs.File.stdout().writeAll(line);
}
