//! Per-instance host state: limits, the deny-all WASI context, and the plugin's log.

use super::bindings::udf::plugin::{host, types};
use crate::log::{LogLevel, LogRecord, Logger};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wasmtime::StoreLimits;
use wasmtime::component::HasData;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, ResourceTable, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

/// Longest log line kept; longer ones are cut with a marker.
pub const MAX_LOG_LINE: usize = 4096;
/// Log lines one instance may send before the rest are dropped (with one notice).
pub const MAX_LOG_LINES: usize = 10_000;
/// Lines of the log kept to attach to an error.
const LOG_TAIL: usize = 8;

/// Who is logging: plugin name and partition.
#[derive(Debug, Clone)]
pub struct LogOrigin {
    pub plugin: Arc<str>,
    pub partition: Option<usize>,
}

/// The log of one instance: forwards lines to the logger, keeps the last few.
pub struct PluginLog {
    origin: LogOrigin,
    logger: Logger,
    tail: VecDeque<String>,
    lines: usize,
}

impl PluginLog {
    fn new(origin: LogOrigin, logger: Logger) -> Self {
        PluginLog { origin, logger, tail: VecDeque::new(), lines: 0 }
    }

    /// Record one line (truncated, rate-limited).
    pub fn push(&mut self, level: LogLevel, message: &str) {
        self.lines += 1;
        if self.lines > MAX_LOG_LINES {
            if self.lines == MAX_LOG_LINES + 1 {
                self.emit(LogLevel::Warn, format!("more than {MAX_LOG_LINES} log lines; dropping the rest"));
            }
            return;
        }
        let message = truncate(message, MAX_LOG_LINE);
        if self.tail.len() == LOG_TAIL {
            self.tail.pop_front();
        }
        self.tail.push_back(message.clone());
        self.emit(level, message);
    }

    fn emit(&self, level: LogLevel, message: String) {
        (self.logger)(&LogRecord {
            plugin: self.origin.plugin.to_string(),
            partition: self.origin.partition,
            level,
            message,
        });
    }

    /// The last lines, oldest first.
    pub fn tail(&self) -> Vec<String> {
        self.tail.iter().cloned().collect()
    }
}

/// An error message from a plugin, cut to [`MAX_LOG_LINE`] bytes.
pub fn truncate_message(message: &str) -> String {
    truncate(message, MAX_LOG_LINE)
}

fn truncate(message: &str, max: usize) -> String {
    if message.len() <= max {
        return message.to_owned();
    }
    let mut end = max;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [{} bytes cut]", &message[..end], message.len() - end)
}

/// The memory limit of a store, recording the peak memory it allowed.
pub struct Limits {
    inner: StoreLimits,
    /// Largest linear memory granted, in bytes.
    pub peak_memory: usize,
}

impl wasmtime::ResourceLimiter for Limits {
    fn memory_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        let granted = self.inner.memory_growing(current, desired, maximum)?;
        if granted {
            self.peak_memory = self.peak_memory.max(desired);
        }
        Ok(granted)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.inner.memory_grow_failed(error)
    }

    fn table_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        self.inner.table_growing(current, desired, maximum)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.inner.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.inner.instances()
    }

    fn tables(&self) -> usize {
        self.inner.tables()
    }

    fn memories(&self) -> usize {
        self.inner.memories()
    }
}

/// Everything a store holds for one instance.
pub struct HostState {
    pub limits: Limits,
    /// Calls made and time spent in them.
    pub stats: crate::udf::InstanceStats,
    /// When the current call must end (`--timeout`), checked on every epoch tick.
    pub call_deadline: std::time::Instant,
    /// The runtime's interrupt count when the current call started.
    pub interrupt_generation: u64,
    pub log: Arc<Mutex<PluginLog>>,
    wasi: WasiCtx,
    table: ResourceTable,
}

impl HostState {
    /// State with memory limited to `max_memory` bytes and no capabilities.
    pub fn new(max_memory: usize, origin: LogOrigin, logger: Logger) -> Self {
        let log = Arc::new(Mutex::new(PluginLog::new(origin, logger)));
        let inner = wasmtime::StoreLimitsBuilder::new().memory_size(max_memory).trap_on_grow_failure(true).build();
        HostState {
            limits: Limits { inner, peak_memory: 0 },
            stats: crate::udf::InstanceStats::default(),
            call_deadline: std::time::Instant::now(),
            interrupt_generation: 0,
            wasi: deny_all_wasi(&log),
            table: ResourceTable::new(),
            log,
        }
    }

    pub fn log_tail(&self) -> Vec<String> {
        self.log.lock().map(|l| l.tail()).unwrap_or_default()
    }
}

/// A WASI context that grants nothing: no files, environment, arguments or network; a
/// clock frozen at zero and "random" bytes that are all zero (so plugins are
/// deterministic); stdout and stderr become log lines.
fn deny_all_wasi(log: &Arc<Mutex<PluginLog>>) -> WasiCtx {
    WasiCtxBuilder::new()
        .stdout(LogPipe::new(log.clone(), LogLevel::Info))
        .stderr(LogPipe::new(log.clone(), LogLevel::Warn))
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .wall_clock(FrozenClock)
        .monotonic_clock(FrozenClock)
        .secure_random(wasmtime_wasi::Deterministic::new(vec![0]))
        .insecure_random(wasmtime_wasi::Deterministic::new(vec![0]))
        .insecure_random_seed(0)
        .build()
}

/// A clock that always reads zero.
struct FrozenClock;

impl HostWallClock for FrozenClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        Duration::ZERO
    }
}

impl HostMonotonicClock for FrozenClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        0
    }
}

/// stdout/stderr of a guest, split into lines for the log.
#[derive(Clone)]
struct LogPipe {
    log: Arc<Mutex<PluginLog>>,
    level: LogLevel,
    partial: Arc<Mutex<Vec<u8>>>,
}

impl LogPipe {
    fn new(log: Arc<Mutex<PluginLog>>, level: LogLevel) -> Self {
        LogPipe { log, level, partial: Arc::default() }
    }

    fn write_bytes(&self, bytes: &[u8]) {
        let (Ok(mut partial), Ok(mut log)) = (self.partial.lock(), self.log.lock()) else {
            return;
        };
        for &b in bytes {
            if b == b'\n' {
                log.push(self.level, &String::from_utf8_lossy(&partial));
                partial.clear();
            } else if partial.len() <= MAX_LOG_LINE {
                partial.push(b);
            }
        }
    }
}

impl IsTerminal for LogPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for LogPipe {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        // Only WASIp3 uses this; it is not linked.
        Box::new(tokio::io::sink())
    }
}

impl OutputStream for LogPipe {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        self.write_bytes(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for LogPipe {
    async fn ready(&mut self) {}
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl host::Host for HostState {
    fn log(&mut self, level: host::LogLevel, message: String) {
        let level = match level {
            host::LogLevel::Trace => LogLevel::Trace,
            host::LogLevel::Debug => LogLevel::Debug,
            host::LogLevel::Info => LogLevel::Info,
            host::LogLevel::Warn => LogLevel::Warn,
            host::LogLevel::Error => LogLevel::Error,
        };
        if let Ok(mut log) = self.log.lock() {
            log.push(level, &message);
        }
    }
}

impl types::Host for HostState {}

/// Marker for `add_to_linker`: the host interfaces get `&mut HostState`.
pub struct HostData;

impl HasData for HostData {
    type Data<'a> = &'a mut HostState;
}
