import java.io.InputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.util.HexFormat;
import java.util.List;

/**
 * Downloads the jars a deps file lists (lines "group artifact version
 * sha1") from Maven Central into DIR, skipping those already there, and
 * checks each one's SHA-1. Needs only a JDK (11 or later):
 *
 *   java Fetch.java DEPS_FILE DIR
 *
 * MAVEN_REPOSITORY replaces https://repo1.maven.org/maven2 (a mirror).
 */
public class Fetch {
    public static void main(String[] args) throws Exception {
        String repo = System.getenv().getOrDefault("MAVEN_REPOSITORY",
                "https://repo1.maven.org/maven2");
        Path dir = Path.of(args[1]);
        Files.createDirectories(dir);
        HttpClient http = HttpClient.newBuilder()
                .followRedirects(HttpClient.Redirect.NORMAL).build();
        for (String line : Files.readAllLines(Path.of(args[0]))) {
            line = line.strip();
            if (line.isEmpty() || line.startsWith("#")) {
                continue;
            }
            String[] f = line.split("\\s+");
            String jar = f[1] + "-" + f[2] + ".jar";
            Path dest = dir.resolve(jar);
            if (Files.exists(dest)) {
                continue;
            }
            String url = repo + "/" + f[0].replace('.', '/') + "/" + f[1] + "/" + f[2] + "/" + jar;
            System.err.println("fetching " + url);
            HttpResponse<InputStream> r = http.send(HttpRequest.newBuilder(URI.create(url)).build(),
                    HttpResponse.BodyHandlers.ofInputStream());
            if (r.statusCode() != 200) {
                throw new Exception(url + ": HTTP " + r.statusCode());
            }
            Path part = dir.resolve(jar + ".part");
            Files.copy(r.body(), part, StandardCopyOption.REPLACE_EXISTING);
            String sum = HexFormat.of().formatHex(
                    MessageDigest.getInstance("SHA-1").digest(Files.readAllBytes(part)));
            if (!sum.equals(f[3])) {
                Files.delete(part);
                throw new Exception(url + ": SHA-1 " + sum + ", expected " + f[3]);
            }
            Files.move(part, dest, StandardCopyOption.ATOMIC_MOVE);
        }
    }
}
