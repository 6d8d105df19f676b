import java.io.File;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;

/** Files in Java, with java.io only: writes /data/java.txt, reads it back, lists /data. */
public class JavaFiles {
    public static void main(String[] args) throws IOException {
        byte[] text = "written by java\n".getBytes(StandardCharsets.UTF_8);
        try (FileOutputStream out = new FileOutputStream("/data/java.txt")) {
            out.write(text);
        }
        byte[] buf = new byte[64];
        int n;
        try (FileInputStream in = new FileInputStream("/data/java.txt")) {
            n = in.read(buf);
        }
        String back = new String(buf, 0, Math.max(n, 0), StandardCharsets.UTF_8);
        if (!back.equals("written by java\n")) {
            throw new IllegalStateException("java: read back " + back);
        }
        String[] names = new File("/data").list();
        System.out.println("java: wrote and read back /data/java.txt; /data lists "
                + (names == null ? -1 : names.length) + " names");
    }
}
