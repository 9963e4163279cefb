//! The `hcp` binary.

fn main() -> std::process::ExitCode {
    hcp::cli::main()
}
