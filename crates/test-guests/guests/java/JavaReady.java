import warden.Task;

/** Prints "ready" and sleeps ten minutes: one resident copy of a Java program. */
public class JavaReady {
    public static void main(String[] args) {
        System.out.println("ready");
        Task.sleep(600_000_000_000L);
    }
}
