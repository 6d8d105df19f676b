/* @NAME@: an HTTP handler (WAGI: CGI over WASI). Warden starts a fresh
 * task for every request: the request arrives as CGI environment variables
 * (and the body on stdin), and what the program writes to stdout is the
 * response, headers first. Nothing survives the request.
 */
#include <stdio.h>
#include <stdlib.h>

static const char *env(const char *name) {
    const char *v = getenv(name);
    return v ? v : "";
}

int main(void) {
    printf("Content-Type: text/plain; charset=utf-8\r\n\r\n");
    printf("Hello from @NAME@: %s %s%s%s\n", env("REQUEST_METHOD"), env("PATH_INFO"),
           *env("QUERY_STRING") ? "?" : "", env("QUERY_STRING"));
    return 0;
}
