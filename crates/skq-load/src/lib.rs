//! placeholder

/// Command-line entry points.
pub mod cli {
    /// Arguments (placeholder until this crate lands).
    #[derive(clap::Args, Debug)]
    pub struct LoadArgs {}
    /// Entry point (placeholder).
    pub fn run(_a: LoadArgs) -> anyhow::Result<()> {
        anyhow::bail!("not implemented yet")
    }
}
