//! placeholder

/// Topology (placeholder).
pub mod topology {
    /// The CPU topology tree.
    pub struct Topology;
    impl Topology {
        /// Reads /sys.
        pub fn detect() -> std::io::Result<Self> {
            Ok(Topology)
        }
    }
    impl std::fmt::Display for Topology {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("unknown\n")
        }
    }
}
