# Shared by scripts/test and scripts/bench: installing Debian packages.
# Source it; it defines functions only.

# Whether clang can build a C program for wasm32-wasi (the guest toolchain).
can_build_guests() {
    local dir ok
    dir=$(mktemp -d)
    printf 'int main(void) { return 0; }\n' >"$dir/t.c"
    clang --target=wasm32-wasi -O2 "$dir/t.c" -o "$dir/t.wasm" >/dev/null 2>&1
    ok=$?
    rm -rf "$dir"
    return $ok
}

# The packages that provide the C guest toolchain, if it is missing.
guest_toolchain_packages() {
    can_build_guests || echo "clang lld wasi-libc libclang-rt-dev-wasm32"
}

# apt_install PACKAGE... : installs them (as root, or with sudo).
apt_install() {
    [ $# -gt 0 ] || return 0
    echo "installing: $*" >&2
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq "$@" >/dev/null
}
