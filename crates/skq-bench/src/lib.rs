//! placeholder

/// Command-line entry points.
pub mod cli {
    /// Arguments (placeholder until this crate lands).
    #[derive(clap::Args, Debug)]
    pub struct BenchArgs {}
    /// Entry point (placeholder).
    pub fn run(_a: BenchArgs) -> anyhow::Result<()> {
        anyhow::bail!("not implemented yet")
    }
}
