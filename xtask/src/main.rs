//! `cargo xtask`: the testbed's host tool.

mod ministat;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "Build, boot and measure the i386 testbed")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// FreeBSD ministat on files of numbers.
    Ministat(ministat::Args),
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.cmd {
        Cmd::Ministat(a) => ministat::main(a),
    };
    std::process::exit(code);
}
