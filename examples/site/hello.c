/* A per-request handler (WAGI: CGI over WASI) in C: a greeting page. Each
 * request runs a fresh instance of this module, so nothing it does
 * survives the request. The request arrives as CGI environment variables;
 * the response is written to stdout. */
#include <stdio.h>
#include <stdlib.h>

static const char *env(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : "-";
}

int main(void) {
    printf("Content-Type: text/html; charset=utf-8\r\n\r\n");
    printf("<!doctype html><title>Warden</title>\n"
           "<h1>Hello from a task</h1>\n"
           "<p>This page was written by a fresh WebAssembly task, started for this request "
           "and gone after it: %s %s%s%s, asked of %s:%s by %s.</p>\n",
           env("REQUEST_METHOD"), env("PATH_INFO"), *env("QUERY_STRING") != '-' ? "?" : "",
           *env("QUERY_STRING") != '-' ? env("QUERY_STRING") : "", env("SERVER_NAME"),
           env("SERVER_PORT"), env("HTTP_USER_AGENT"));
    printf("<ul><li><a href=\"/fortune\">/fortune</a>: a handler in AssemblyScript</li>\n"
           "<li><a href=\"/count\">/count</a>: a servlet, one long-lived task keeping a count</li></ul>\n");
    return 0;
}
