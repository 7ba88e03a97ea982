//! Starting a cache server: the architecture picks the code that runs it.

pub use crate::config::{Arch, ServerConfig};
pub use crate::ctx::Ctx;
pub use crate::running::Running;

/// Starts a server of the configured architecture.
pub fn start(cfg: ServerConfig) -> anyhow::Result<Running> {
    match cfg.arch {
        #[cfg(feature = "runtime")]
        Arch::Shared => crate::shared::start(cfg),
        #[cfg(not(feature = "runtime"))]
        Arch::Shared => anyhow::bail!("--arch shared: built without the `runtime` feature"),
        Arch::Tpc => crate::tpc::start(cfg),
    }
}
