//! placeholder

/// Command-line entry points.
pub mod cli {
    /// Arguments (placeholder until this crate lands).
    #[derive(clap::Args, Debug)]
    pub struct RpcArgs {}
    /// Entry point (placeholder).
    pub fn run_rpc(_a: RpcArgs) -> anyhow::Result<()> {
        anyhow::bail!("not implemented yet")
    }
}

/// SKQ's pipe benchmark.
pub mod pipes {
    /// Arguments (placeholder).
    #[derive(clap::Args, Debug)]
    pub struct PipesArgs {}
    /// Entry point (placeholder).
    pub fn run(_a: PipesArgs) -> anyhow::Result<()> {
        anyhow::bail!("not implemented yet")
    }
}
