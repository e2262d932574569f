//! The limits wasm plugins run under, as a plan records them.

use serde::{Deserialize, Serialize};

/// The limits wasm plugins run under.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// Wall-clock limit per call, in seconds (ignored when `trusted`).
    pub timeout_seconds: f64,
    /// Linear memory per instance, in bytes.
    pub max_memory: u64,
    /// The total of every instance's linear memory and of what their calls return to the
    /// host, in bytes, per process that runs partitions (`None`: half the memory of the
    /// machine it runs on; plans written before it existed read as `None`).
    #[serde(default)]
    pub max_memory_total: Option<u64>,
    /// No timeout checks (epoch interruption off) where the run was planned. Workers elsewhere
    /// ignore it: a plan never turns a protection off (`run-partition --trusted` does).
    pub trusted: bool,
}

impl Limits {
    /// These limits with the timeout on: how a plan's limits apply in a process that did
    /// not plan the run (a Dask worker). A plan never turns a protection off where it
    /// runs; `trusted` is that process's own choice (`run-partition --trusted`).
    pub fn untrusted(self) -> Limits {
        Limits { trusted: false, ..self }
    }
}

impl Default for Limits {
    /// The wasm runtime's defaults: 300 s per call, 4 GiB per instance, half the
    /// machine's memory in total, untrusted.
    fn default() -> Self {
        Limits { timeout_seconds: 300.0, max_memory: 4 << 30, max_memory_total: None, trusted: false }
    }
}
