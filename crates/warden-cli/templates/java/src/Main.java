import warden.Task;

/**
 * @NAME@: a Java program for Warden, compiled to WebAssembly by TeaVM with
 * Warden's Java SDK (package {@code warden}, copied into sdk/java).
 *
 * Build: ./build      Run: warden run @NAME@.wasm --env GREETING=Hi -- you
 */
public class Main {
    public static void main(String[] args) {
        String who = args.length > 0 ? args[0] : "world";
        // TeaVM's System.getenv returns null under WASI; Task.env reads
        // the task's environment.
        String greeting = Task.env("GREETING");
        System.out.println((greeting != null ? greeting : "Hello") + ", " + who + ", from @NAME@");
    }
}
