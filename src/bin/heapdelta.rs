//! `heapdelta`: show, compare and convert heapdelta's files (see `heapdelta --help`).

fn main() -> std::process::ExitCode {
    heapdelta::cli::run(std::env::args_os())
}
