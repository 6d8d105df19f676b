//! A child spawned with 64 MiB of arguments (16,384 pointers to one 4 KiB
//! string): the arguments are charged to the child's 4 MiB budget, so the
//! spawn is refused with an error code and the host copies nothing big.

use super::*;

#[test]
fn sixty_four_mebibytes_of_arguments() {
    let bomb = task(
        "bomb",
        guests::HOSTILE,
        &["args-bomb"],
        &format!(
            "memory_limit = '32MiB'\nmodules = {{ self = '{}' }}",
            guests::HOSTILE
        ),
    );
    let run = attack("", &bomb);
    run.exited_saying("bomb", "args-bomb: 64 MiB of arguments: ");
    assert!(!run.out("bomb").contains("spawned"), "{}", run.out("bomb"));
}
