use clap::Parser;

// glibc's allocator returned and re-faulted the pages of every large response (mmap above
// 128 KiB, heap trimming below): page faults and TLB shootdowns were ~25% of an
// eth_getBlockReceipts load (80 KB responses), and malloc/free ~11% of eth_simulateV1.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    let cli = simnode::cli::Cli::parse();
    let json_logs = cli.log_format.eq_ignore_ascii_case("json");
    match simnode::cli::run(cli) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        // A log pipeline reading `--log.format json` gets the reason as one of its lines.
        Err(err) if json_logs => {
            tracing::error!(target: "simnode", error = format!("{err:#}"), "stopped");
            std::process::ExitCode::FAILURE
        }
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
