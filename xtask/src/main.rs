//! `cargo xtask`: see the library (`lib.rs`), which holds every command.

fn main() {
    xtask::main()
}
