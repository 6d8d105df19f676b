// A block device from AssemblyScript: writes four sectors, syncs, reads
// them back, and checks what the kernel refuses (a second holder, sectors
// past the end, a part of a sector).
import { Device, SECTOR, describe } from "../../sdk/assemblyscript/warden";

function expect(what: string, got: i64, want: i64): void {
  if (got != want) abort(what + ": " + got.toString() + " (" + describe(got) + ")");
}

const args = process.argv;
const name = args.length > 1 ? args[1] : "disk";
const disk = Device.open(name);
expect("open", disk.handle < 0 ? disk.handle : 0, 0);
const sectors = disk.sectors();
expect("sectors", sectors < 0 ? sectors : 0, 0);
const data = new Uint8Array(4 * SECTOR);
for (let i = 0; i < 4; i++) {
  const line = String.UTF8.encode("assemblyscript sector " + (2 + i).toString() + "\n");
  data.set(Uint8Array.wrap(line), i * SECTOR);
}
expect("write", disk.write(2, data), data.length);
expect("sync", disk.sync(), 0);
const back = new Uint8Array(4 * SECTOR);
expect("read", disk.read(2, back), back.length);
for (let i = 0; i < data.length; i++) expect("byte " + i.toString(), back[i], data[i]);
expect("second holder", Device.open(name).handle, -16);
expect("past the end", disk.read(<u64>(sectors - 1), new Uint8Array(2 * SECTOR)), -13);
expect("part of a sector", disk.read(0, new Uint8Array(100)), -10);
process.stdout.write("assemblyscript: device checked, " + sectors.toString() + " sectors\n");
