//! API keys. (Being written: see issue 3.)

#[derive(Debug, Clone, clap::Args)]
pub struct KeysArgs {
    #[arg(long)]
    pub datadir: std::path::PathBuf,
}

pub fn run(_args: KeysArgs) -> anyhow::Result<()> {
    anyhow::bail!("keys: not built yet")
}
