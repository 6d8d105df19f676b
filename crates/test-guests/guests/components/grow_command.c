/* The command of the several-memories test (see grow.wit), composed with
 * the library: `grow_command OWN LIB` grows its own memory by OWN pages
 * and the library's by LIB pages, one page at a time, and prints how many
 * of each were granted. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((import_module("warden-test:grow/pages@0.1.0"), import_name("grow")))
int library_grow(unsigned n);

int main(int argc, char **argv) {
    int own = argc > 1 ? atoi(argv[1]) : 0, lib = argc > 2 ? atoi(argv[2]) : 0;
    int own_got = 0, lib_got = 0;
    while (own_got < own && __builtin_wasm_memory_grow(0, 1) >= 0) own_got++;
    while (lib_got < lib && library_grow(1) >= 0) lib_got++;
    printf("own %d of %d pages, library %d of %d pages\n", own_got, own, lib_got, lib);
    return 0;
}
