use clap::Parser;

fn main() -> std::process::ExitCode {
    let cli = simnode::cli::Cli::parse();
    match simnode::cli::run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
