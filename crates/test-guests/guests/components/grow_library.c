/* The library component of the several-memories test (see grow.wit): its
 * memory is its own, apart from the command's. Built with no libc, so it
 * imports nothing. */

__attribute__((export_name("warden-test:grow/pages@0.1.0#grow")))
int grow(unsigned n) {
    return __builtin_wasm_memory_grow(0, n);
}
