import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import warden.Device;
import warden.Task;
import warden.WardenException;

/**
 * A block device from Java: writes four sectors, syncs, reads them back,
 * and checks what the kernel refuses (a second holder, sectors past the
 * end, a part of a sector).
 */
public class JavaDisk {
    public static void main(String[] args) {
        String name = args.length > 0 ? args[0] : "disk";
        Device disk = Device.open(name);
        long sectors = disk.sectors();
        byte[] data = new byte[4 * Device.SECTOR];
        for (int i = 0; i < 4; i++) {
            byte[] line = ("java sector " + (2 + i) + "\n").getBytes(StandardCharsets.UTF_8);
            System.arraycopy(line, 0, data, i * Device.SECTOR, line.length);
        }
        check("write", disk.write(2, data) == data.length);
        disk.sync();
        byte[] back = new byte[4 * Device.SECTOR];
        check("read", disk.read(2, back) == back.length);
        check("read back", Arrays.equals(back, data));
        refused("second holder", WardenException.BUSY, () -> Device.open(name));
        refused("past the end", WardenException.RANGE,
                () -> disk.read(sectors - 1, new byte[2 * Device.SECTOR]));
        refused("part of a sector", WardenException.INVALID, () -> disk.read(0, new byte[100]));
        System.out.println("java: device checked, " + sectors + " sectors");
    }

    private static void check(String what, boolean ok) {
        if (!ok) {
            System.out.println(what + " failed");
            Task.exit(1);
        }
    }

    private static void refused(String what, int code, Runnable r) {
        try {
            r.run();
        } catch (WardenException e) {
            check(what + ": " + e.getMessage(), e.code() == code);
            return;
        }
        check(what + " was not refused", false);
    }
}
