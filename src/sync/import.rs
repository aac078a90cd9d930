pub fn run(_a: crate::cli::ImportArgs) -> anyhow::Result<()> { anyhow::bail!("todo") }
