//! Starting a cache server: the architecture picks the code that runs it.

pub use crate::config::{Arch, KvMode, ServerConfig};
pub use crate::ctx::Ctx;
pub use crate::running::Running;

/// Starts a server of the configured architecture.
pub fn start(cfg: ServerConfig) -> anyhow::Result<Running> {
    let tick = cfg.idle_tick;
    let mut running = match cfg.mode {
        #[cfg(feature = "runtime")]
        KvMode::Shared(_) => crate::shared::start(cfg),
        KvMode::Tpc | KvMode::TpcStrict => crate::tpc::start(cfg),
    }?;
    if let Some(period) = tick {
        match crate::tick::IdleTick::start(period) {
            Ok(t) => running.tick = Some(t),
            Err(e) => {
                running.stop();
                anyhow::bail!("--idle-tick-us: starting its threads: {e}");
            }
        }
    }
    Ok(running)
}
