//! Per-instance host state: limits (the instance's and the run's total memory), the
//! deny-all WASI context with its frozen clock and timers, and the plugin's log.

use super::Shared;
use super::bindings::udf::plugin::{host, types};
use super::budget::{CallKind, MemoryBudget, Take};
use crate::arrays::{FixedLimit, MemoryLimit};
use crate::log::{LogLevel, LogRecord, Logger, escape_control};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wasmtime::StoreLimits;
use wasmtime::component::{HasData, Resource};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::bindings::clocks::monotonic_clock;
use wasmtime_wasi::p2::{DynPollable, OutputStream, Pollable, StreamResult};
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, ResourceTable, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

/// Longest log line kept; longer ones are cut with a marker.
pub const MAX_LOG_LINE: usize = 4096;
/// Log lines one instance may send before the rest are dropped (with one notice); the
/// last lines are still kept for its error message.
pub const MAX_LOG_LINES: usize = 10_000;
/// Bytes of log the instances of one plugin may send in one run before the rest are
/// dropped (with one notice); the next run starts again from zero (a notebook's
/// `Context` or a Dask worker runs many).
pub const MAX_RUN_LOG_BYTES: usize = 16 << 20;
/// Lines of the log kept to attach to an error.
const LOG_TAIL: usize = 8;
/// Host resources (WASI streams, pollables) one instance may hold at once; each costs
/// host memory, and a plugin needs a handful.
pub const MAX_RESOURCES: usize = 10_000;

/// Who is logging: plugin name and partition.
#[derive(Debug, Clone)]
pub struct LogOrigin {
    pub plugin: Arc<str>,
    pub partition: Option<usize>,
}

/// The log output of every instance of a plugin in one run, capped in total.
#[derive(Debug, Default)]
pub struct RunLog {
    bytes: AtomicUsize,
    noticed: AtomicBool,
}

impl RunLog {
    /// Count `bytes` of a line to be sent; `false` once the run's total is exceeded.
    fn admit(&self, bytes: usize) -> bool {
        self.bytes.fetch_add(bytes, Ordering::Relaxed).saturating_add(bytes) <= MAX_RUN_LOG_BYTES
    }

    /// `true` for the first caller after the total was exceeded.
    fn first_notice(&self) -> bool {
        !self.noticed.swap(true, Ordering::Relaxed)
    }
}

/// The log of one instance: forwards lines to the logger (capped per instance and per
/// run), keeps the last few (escaped) for its error messages.
pub struct PluginLog {
    origin: LogOrigin,
    logger: Logger,
    run: Arc<RunLog>,
    tail: VecDeque<String>,
    lines: usize,
}

impl PluginLog {
    fn new(origin: LogOrigin, logger: Logger, run: Arc<RunLog>) -> Self {
        PluginLog { origin, logger, run, tail: VecDeque::new(), lines: 0 }
    }

    /// A new partition's lines: its origin, an empty tail, the per-instance cap afresh.
    fn begin(&mut self, origin: LogOrigin) {
        self.origin = origin;
        self.tail.clear();
        self.lines = 0;
    }

    /// Record one line: cut to [`MAX_LOG_LINE`], kept in the tail, and sent to the
    /// logger unless this instance or the run has sent too much.
    pub fn push(&mut self, level: LogLevel, message: &str) {
        let message = truncate(message, MAX_LOG_LINE);
        if self.tail.len() == LOG_TAIL {
            self.tail.pop_front();
        }
        self.tail.push_back(escape_control(&message).into_owned());
        // A Rust panic's message is followed by a trap, whose error carries it (in the
        // tail): printing it live as well would show it twice.
        if is_panic_message(&message) {
            return;
        }
        self.lines += 1;
        if self.lines > MAX_LOG_LINES {
            if self.lines == MAX_LOG_LINES + 1 {
                self.emit(
                    LogLevel::Warn,
                    format!("more than {MAX_LOG_LINES} log lines; dropping the rest (the last ones stay with errors)"),
                );
            }
            return;
        }
        self.emit(level, message);
    }

    fn emit(&self, level: LogLevel, message: String) {
        let message = if self.run.admit(message.len() + 32) {
            message
        } else if self.run.first_notice() {
            format!(
                "the instances of this plugin logged more than {} MiB in this run; dropping the rest",
                MAX_RUN_LOG_BYTES >> 20
            )
        } else {
            return;
        };
        (self.logger)(&LogRecord {
            plugin: self.origin.plugin.to_string(),
            partition: self.origin.partition,
            level,
            message,
        });
    }

    /// The last lines, oldest first, control characters escaped.
    pub fn tail(&self) -> Vec<String> {
        self.tail.iter().cloned().collect()
    }
}

/// Whether a log line is a Rust panic's message (the default panic hook's, or the guest
/// SDK's `panic: ...`).
fn is_panic_message(line: &str) -> bool {
    let line = line.strip_prefix("panic: ").unwrap_or(line);
    line.starts_with("panicked at ") || line.starts_with("thread '") && line.contains("' panicked at ")
}

/// An error message from a plugin, cut to [`MAX_LOG_LINE`] bytes, control characters
/// escaped (it is printed to terminals).
pub fn truncate_message(message: &str) -> String {
    escape_control(&truncate(message, MAX_LOG_LINE)).into_owned()
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

/// A memory growth the run's total budget does not allow.
#[derive(Debug)]
pub struct BudgetExceeded {
    pub limit: usize,
}

impl std::fmt::Display for BudgetExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exceeded the total memory budget of {} MiB for all plugin instances of the run (--max-memory-total)",
            self.limit >> 20
        )
    }
}

impl std::error::Error for BudgetExceeded {}

/// An instance's memory went past `--max-memory` (all its linear memories, tables and
/// host arrays together).
#[derive(Debug)]
pub struct MemoryLimitExceeded {
    pub limit: usize,
}

impl std::fmt::Display for MemoryLimitExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exceeded the memory limit of {} MiB (--max-memory, all of the instance's memories, tables and host arrays)",
            self.limit >> 20
        )
    }
}

impl std::error::Error for MemoryLimitExceeded {}

/// The error a call traps with when the runtime or the plugin is interrupted.
#[derive(Debug)]
pub struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted")
    }
}

impl std::error::Error for Interrupted {}

/// Host bytes per table element counted against the limits (a function reference is a
/// pointer).
const TABLE_ELEMENT_BYTES: usize = std::mem::size_of::<usize>();

/// The memory limits of a store: its own (`--max-memory`, counting every linear memory,
/// table and host array of the instance together) and the run's total budget, recording
/// the peak memory it allowed.
pub struct Limits {
    inner: StoreLimits,
    budget: Arc<MemoryBudget>,
    /// The instance's cap (`--max-memory`) on its linear memories, tables and host arrays
    /// together: one count, shared with its host arrays ([`super::arrays::PluginArrays`]).
    cap: Arc<FixedLimit>,
    /// Bytes of linear memory and tables taken from the cap and the budget (given back on
    /// drop).
    held: usize,
    /// Largest linear memory granted (all memories together), in bytes.
    pub peak_memory: usize,
    /// Linear memory granted now (all memories together).
    memory: usize,
}

impl Limits {
    /// Take `growth` bytes for the instance: within its own cap, then from the run's
    /// budget, waiting (while `stop` says nothing) for lifts in flight to give back.
    fn take(&mut self, growth: usize, stop: &dyn Fn() -> Option<wasmtime::Error>) -> wasmtime::Result<()> {
        if !self.cap.try_take(growth) {
            return Err(MemoryLimitExceeded { limit: self.cap.limit() }.into());
        }
        let refused: wasmtime::Error = match self.budget.take(growth, stop) {
            Take::Taken => {
                self.held += growth;
                return Ok(());
            }
            Take::Exceeded => BudgetExceeded { limit: self.budget.limit() }.into(),
            Take::Stopped(why) => why,
        };
        self.cap.give_back(growth);
        Err(refused)
    }

    /// Whether `growth` more bytes fit under the instance's cap now.
    fn fits(&self, growth: usize) -> bool {
        growth <= self.cap.available()
    }
}

impl wasmtime::ResourceLimiter for HostState {
    fn memory_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        let granted = self.limits.inner.memory_growing(current, desired, maximum)?;
        if !granted {
            return Ok(false);
        }
        let growth = desired.saturating_sub(current);
        if !self.limits.fits(growth) {
            // Freed host arrays kept for reuse still count: give them back first.
            self.arrays.trim();
        }
        let stop = CallStop::of(self);
        self.limits.take(growth, &|| stop.reason())?;
        self.limits.memory += growth;
        self.limits.peak_memory = self.limits.peak_memory.max(self.limits.memory);
        Ok(true)
    }

    fn memory_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.limits.inner.memory_grow_failed(error)
    }

    fn table_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        let granted = self.limits.inner.table_growing(current, desired, maximum)?;
        if !granted {
            return Ok(false);
        }
        let growth = desired.saturating_sub(current).saturating_mul(TABLE_ELEMENT_BYTES);
        if !self.limits.fits(growth) {
            self.arrays.trim();
        }
        let stop = CallStop::of(self);
        self.limits.take(growth, &|| stop.reason())?;
        Ok(true)
    }

    fn table_grow_failed(&mut self, error: wasmtime::Error) -> wasmtime::Result<()> {
        self.limits.inner.table_grow_failed(error)
    }

    fn instances(&self) -> usize {
        self.limits.inner.instances()
    }

    fn tables(&self) -> usize {
        self.limits.inner.tables()
    }

    fn memories(&self) -> usize {
        self.limits.inner.memories()
    }
}

/// Why a call must stop while a growth of its instance waits for the budget (where
/// neither epochs nor Ctrl-C reach): the runtime or the plugin was interrupted, or (with
/// epochs) the call is past its `--timeout`. Taken out of the state, so the limits can
/// be borrowed while it is checked.
struct CallStop {
    runtime: Arc<std::sync::atomic::AtomicU64>,
    udf: Arc<std::sync::atomic::AtomicU64>,
    generation: u64,
    deadline: Option<std::time::Instant>,
}

impl CallStop {
    fn of(state: &HostState) -> Self {
        CallStop {
            runtime: state.runtime_interrupts.clone(),
            udf: state.udf_interrupts.clone(),
            generation: state.interrupt_generation,
            deadline: state.epochs.then_some(state.call_deadline),
        }
    }

    fn reason(&self) -> Option<wasmtime::Error> {
        let now = self.runtime.load(Ordering::Relaxed).wrapping_add(self.udf.load(Ordering::Relaxed));
        if now != self.generation {
            return Some(Interrupted.into());
        }
        self.deadline.is_some_and(|d| std::time::Instant::now() >= d).then(|| wasmtime::Trap::Interrupt.into())
    }
}

impl Drop for Limits {
    fn drop(&mut self) {
        self.budget.give_back(self.held);
        self.cap.give_back(self.held);
    }
}

/// Everything a store holds for one instance.
pub struct HostState {
    pub limits: Limits,
    /// Calls made and time spent in them.
    pub stats: crate::udf::InstanceStats,
    /// When the current call must end (`--timeout`), checked on every epoch tick.
    pub call_deadline: std::time::Instant,
    /// The interrupt count (the runtime's and the plugin's) when the current call
    /// started.
    pub interrupt_generation: u64,
    /// Bumped by `WasmUdf::interrupt`: stops the calls of this plugin's instances only.
    pub udf_interrupts: Arc<std::sync::atomic::AtomicU64>,
    /// Bumped by `WasmRuntime::interrupt`: stops every call of the runtime.
    runtime_interrupts: Arc<std::sync::atomic::AtomicU64>,
    /// Whether calls have a deadline (epoch interruption on, not `--trusted`).
    epochs: bool,
    /// What the current call may return (its hostcall fuel), for messages.
    pub call_kind: CallKind,
    pub log: Arc<Mutex<PluginLog>>,
    /// The plugin's host arrays (the contract's `arrays` interface).
    pub arrays: super::arrays::PluginArrays,
    wasi: WasiCtx,
    table: ResourceTable,
}

impl HostState {
    /// State with the runtime's limits (memory per instance, the total budget), the log
    /// caps (per instance, and `run_log`: per plugin and run) and no capabilities.
    pub fn new(
        shared: &Shared,
        origin: LogOrigin,
        udf_interrupts: Arc<std::sync::atomic::AtomicU64>,
        run_log: Arc<RunLog>,
    ) -> Self {
        let log = Arc::new(Mutex::new(PluginLog::new(origin, shared.options.logger.clone(), run_log)));
        let inner = wasmtime::StoreLimitsBuilder::new()
            .memory_size(shared.options.max_memory)
            .trap_on_grow_failure(true)
            .build();
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_RESOURCES);
        let cap = Arc::new(FixedLimit::new(shared.options.max_memory));
        HostState {
            limits: Limits {
                inner,
                budget: shared.budget.clone(),
                cap: cap.clone(),
                held: 0,
                peak_memory: 0,
                memory: 0,
            },
            stats: crate::udf::InstanceStats::default(),
            call_deadline: std::time::Instant::now(),
            interrupt_generation: 0,
            udf_interrupts,
            runtime_interrupts: shared.interrupts.clone(),
            epochs: shared.epochs,
            call_kind: CallKind::Control,
            wasi: deny_all_wasi(&log),
            table,
            log,
            arrays: super::arrays::PluginArrays::new(
                shared.budget.clone(),
                cap,
                shared.interrupts.clone(),
                shared.epochs,
            ),
        }
    }

    /// Ready an instance kept from an earlier partition for the next one: the log
    /// names the new partition and its per-instance cap starts again, the statistics
    /// count this partition's calls. Memory and its peak are the instance's own.
    pub(super) fn begin_partition(&mut self, origin: LogOrigin) {
        if let Ok(mut log) = self.log.lock() {
            log.begin(origin);
        }
        self.stats = crate::udf::InstanceStats::default();
        self.arrays.peak_live = self.arrays.live;
    }

    pub(super) fn table_ref(&self) -> &ResourceTable {
        &self.table
    }

    pub(super) fn table_mut(&mut self) -> &mut ResourceTable {
        &mut self.table
    }

    /// The interrupts so far: the runtime's (`runtime`) and this plugin's.
    pub fn interrupts(&self, runtime: &std::sync::atomic::AtomicU64) -> u64 {
        runtime.load(Ordering::Relaxed).wrapping_add(self.udf_interrupts.load(Ordering::Relaxed))
    }

    pub fn log_tail(&self) -> Vec<String> {
        self.log.lock().map(|l| l.tail()).unwrap_or_default()
    }
}

/// A WASI context that grants nothing: no files, environment, arguments or network; a
/// clock frozen at zero and "random" bytes that are all zero (so plugins are
/// deterministic); stdout and stderr become log lines. (Timers: [`FrozenTimers`].)
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

/// The resolution the frozen monotonic clock reports: one second.
const FROZEN_RESOLUTION: u64 = 1_000_000_000;

impl HostMonotonicClock for FrozenClock {
    fn resolution(&self) -> u64 {
        FROZEN_RESOLUTION
    }
    fn now(&self) -> u64 {
        0
    }
}

/// `wasi:clocks/monotonic-clock` with timers that are ready at once.
///
/// wasmtime-wasi's own timers sleep on the real clock inside the host call, where
/// neither `--timeout` (epochs only interrupt wasm code) nor Ctrl-C reach: a plugin
/// calling `std::thread::sleep` (or polling a timer) held the host for as long as it
/// asked. Under the frozen clock no time passes anyway, so a timer is "due" at once: a
/// sleep returns immediately, and a plugin that waits for the clock to move loops in
/// wasm, where the timeout stops it. Each timer with a duration is counted
/// (`InstanceStats::timer_waits`): the conformance kit flags plugins that sleep.
pub(crate) struct FrozenTimers;

impl HasData for FrozenTimers {
    type Data<'a> = FrozenTimersView<'a>;
}

/// What the timers need of a store: its resource table and its statistics.
pub(crate) struct FrozenTimersView<'a> {
    table: &'a mut ResourceTable,
    waits: &'a mut u64,
}

impl FrozenTimers {
    /// Replace the monotonic clock `wasmtime_wasi::p2::add_to_linker_sync` linked.
    pub(crate) fn shadow(linker: &mut wasmtime::component::Linker<HostState>) -> wasmtime::Result<()> {
        linker.allow_shadowing(true);
        let linked = monotonic_clock::add_to_linker::<HostState, FrozenTimers>(linker, |s| FrozenTimersView {
            table: &mut s.table,
            waits: &mut s.stats.timer_waits,
        });
        linker.allow_shadowing(false);
        linked
    }
}

impl FrozenTimersView<'_> {
    fn ready_timer(&mut self, nanos: u64) -> wasmtime::Result<Resource<DynPollable>> {
        if nanos > 0 {
            *self.waits += 1;
        }
        let timer = self.table.push(DueTimer)?;
        wasmtime_wasi::p2::subscribe(self.table, timer)
    }
}

impl monotonic_clock::Host for FrozenTimersView<'_> {
    fn now(&mut self) -> wasmtime::Result<monotonic_clock::Instant> {
        Ok(0)
    }

    fn resolution(&mut self) -> wasmtime::Result<monotonic_clock::Duration> {
        Ok(FROZEN_RESOLUTION)
    }

    fn subscribe_instant(&mut self, when: monotonic_clock::Instant) -> wasmtime::Result<Resource<DynPollable>> {
        self.ready_timer(when)
    }

    fn subscribe_duration(&mut self, duration: monotonic_clock::Duration) -> wasmtime::Result<Resource<DynPollable>> {
        self.ready_timer(duration)
    }
}

/// A timer that is due.
struct DueTimer;

#[wasmtime_wasi::async_trait]
impl Pollable for DueTimer {
    async fn ready(&mut self) {}
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

#[cfg(test)]
mod tests {
    use super::*;

    fn collecting() -> (Logger, Arc<Mutex<Vec<String>>>) {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        (Arc::new(move |r: &LogRecord| sink.lock().unwrap().push(r.message.clone())), lines)
    }

    fn log(logger: Logger, run: Arc<RunLog>) -> PluginLog {
        PluginLog::new(LogOrigin { plugin: Arc::from("p"), partition: Some(0) }, logger, run)
    }

    #[test]
    fn the_tail_keeps_the_last_lines_after_the_cap() {
        let (logger, lines) = collecting();
        let mut log = log(logger, Arc::default());
        for i in 0..MAX_LOG_LINES + 500 {
            log.push(LogLevel::Info, &format!("line {i}"));
        }
        let sent = lines.lock().unwrap().clone();
        assert_eq!(sent.len(), MAX_LOG_LINES + 1, "the lines up to the cap and one notice");
        assert!(sent.last().unwrap().contains("dropping the rest"));
        assert_eq!(log.tail().last().unwrap(), &format!("line {}", MAX_LOG_LINES + 499));
    }

    #[test]
    fn the_run_caps_the_log_of_all_its_instances() {
        let (logger, lines) = collecting();
        let run = Arc::new(RunLog::default());
        let line = "x".repeat(MAX_LOG_LINE);
        for _ in 0..8 {
            let mut log = log(logger.clone(), run.clone());
            for _ in 0..1000 {
                log.push(LogLevel::Info, &line);
            }
        }
        let sent = lines.lock().unwrap().clone();
        let bytes: usize = sent.iter().map(String::len).sum();
        assert!(bytes <= MAX_RUN_LOG_BYTES, "{bytes} bytes");
        assert_eq!(sent.iter().filter(|l| l.contains("logged more than")).count(), 1);
    }

    #[test]
    fn panic_messages_go_with_the_error_not_to_the_log() {
        let (logger, lines) = collecting();
        let mut log = log(logger, Arc::default());
        log.push(LogLevel::Error, "panic: panicked at src/lib.rs:4:5:\nboom");
        log.push(LogLevel::Warn, "thread '<unnamed>' panicked at src/lib.rs:4:5:");
        log.push(LogLevel::Info, "an ordinary line");
        assert_eq!(lines.lock().unwrap().clone(), vec!["an ordinary line".to_owned()]);
        let tail = log.tail();
        assert_eq!(tail[0], "panic: panicked at src/lib.rs:4:5:\\nboom", "kept (escaped) for the error");
    }

    #[test]
    fn messages_are_cut_and_escaped() {
        let cut = truncate_message(&"é".repeat(MAX_LOG_LINE));
        assert!(cut.len() < MAX_LOG_LINE + 32 && cut.ends_with("bytes cut]"), "{}", cut.len());
        assert_eq!(truncate_message("a\x1b[2Jb"), "a\\u{1b}[2Jb");
    }

    /// Issue 33, finding 10: `--max-memory` applied to each of an instance's (up to 4)
    /// linear memories, and tables were outside every limit. The cap is on their sum.
    #[test]
    fn the_memory_cap_counts_every_memory_and_table_of_an_instance() {
        let budget = MemoryBudget::new(1 << 30);
        let mut limits = Limits {
            inner: wasmtime::StoreLimitsBuilder::new().build(),
            budget: budget.clone(),
            cap: Arc::new(FixedLimit::new(100 << 20)),
            held: 0,
            peak_memory: 0,
            memory: 0,
        };
        let never = || None;
        limits.take(60 << 20, &never).expect("the first memory fits");
        let e = limits.take(60 << 20, &never).expect_err("a second memory of 60 MiB does not");
        assert!(e.to_string().contains("exceeded the memory limit of 100 MiB"), "{e}");
        limits.take(40 << 20, &never).expect("what is left fits (a table, say)");
        assert_eq!(budget.used(), 100 << 20);
        drop(limits);
        assert_eq!(budget.used(), 0, "given back when the instance ends");
    }
}
