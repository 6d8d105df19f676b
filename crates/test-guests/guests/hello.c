/* Prints its arguments and the environment variables it can see, then
 * exits with the code given as "exit=N" (default 0). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

int main(int argc, char **argv) {
    int code = 0;
    printf("hello from %s\n", argv[0]);
    for (int i = 1; i < argc; i++) {
        printf("arg %d: %s\n", i, argv[i]);
        if (strncmp(argv[i], "exit=", 5) == 0) code = atoi(argv[i] + 5);
    }
    for (char **e = environ; *e; e++) printf("env: %s\n", *e);
    return code;
}
