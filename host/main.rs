//! The `timewarp` command-line program; see `timewarp --help`.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
