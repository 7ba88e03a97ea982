//! Starting a cache server: the architecture picks the code that runs it.

pub use crate::config::{Arch, KvMode, ServerConfig};
pub use crate::ctx::Ctx;
pub use crate::running::Running;

/// Starts a server of the configured architecture.
pub fn start(cfg: ServerConfig) -> anyhow::Result<Running> {
    match cfg.mode {
        #[cfg(feature = "runtime")]
        KvMode::Shared(_) => crate::shared::start(cfg),
        KvMode::Tpc | KvMode::TpcStrict => crate::tpc::start(cfg),
    }
}
