//! `cargo xtask dist`: assembles the deployable Functions app root in `target/dist/`.

fn main() {}
