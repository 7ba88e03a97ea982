//! placeholder

/// Command-line entry points.
pub mod cli {
    /// Arguments (placeholder until this crate lands).
    #[derive(clap::Args, Debug)]
    pub struct KvArgs {}
    /// Entry point (placeholder).
    pub fn run_kv(_a: KvArgs) -> anyhow::Result<()> {
        anyhow::bail!("not implemented yet")
    }
}
