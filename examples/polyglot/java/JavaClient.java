import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import warden.Portal;
import warden.Task;

/** An echo client in Java: sends args[0] greetings, checks each echo, says bye. */
public class JavaClient {
    public static void main(String[] args) {
        int n = args.length > 0 ? Integer.parseInt(args[0]) : 3;
        Portal echo = Portal.lookup("echo", -1);
        for (int i = 0; i < n; i++) {
            byte[] msg = ("java says hello #" + i).getBytes(StandardCharsets.UTF_8);
            if (!Arrays.equals(echo.call(msg), msg)) {
                System.out.println("bad echo");
                Task.exit(1);
            }
        }
        echo.call("bye".getBytes(StandardCharsets.UTF_8));
        System.out.println("java: " + n + " echoes checked");
    }
}
