//! The `pullcheck` binary: every subcommand is a thin shell in [`pullcheck::cli`].

fn main() -> std::process::ExitCode {
    pullcheck::cli::run()
}
