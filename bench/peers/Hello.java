// The JVM peer's program.
//   java Hello           print "hello" and exit
//   java Hello ready     print "ready", then sleep (one resident copy)
//   java Hello hold M    touch M MiB, print "ready", then spin
public class Hello {
    static volatile byte[] held;

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            System.out.println("hello");
            return;
        }
        if (args[0].equals("hold")) {
            held = new byte[Integer.parseInt(args[1]) << 20];
            java.util.Arrays.fill(held, (byte) 1);
            System.out.println("ready");
            System.out.flush();
            for (;;) held[0]++;
        }
        System.out.println("ready");
        System.out.flush();
        Thread.sleep(600_000);
    }
}
