//! The `pullcheck` binary: every subcommand is a thin shell in [`pullcheck::cli`].

fn main() -> std::process::ExitCode {
    install_panic_hook();
    pullcheck::cli::run()
}

/// A panic is a bug: say so on one line and exit 1 (`internal` in the exit-code table).
/// Release builds use `panic = "abort"`, which would otherwise end the process with SIGABRT
/// (exit 134), a code a podFailurePolicy may route like a pullcheck verdict; exiting from
/// the hook happens before the abort and keeps the documented code.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("panic");
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        eprintln!(
            "pullcheck: internal error: {}{at}",
            message.replace(['\n', '\r'], " ")
        );
        std::process::exit(1);
    }));
}
