//! The run's total memory budget (`--max-memory-total`): one sum for the linear memories
//! of every plugin instance of a runtime and for the data their calls hand back to the
//! host.
//!
//! `--max-memory` caps one instance; without a total, 16 partitions in parallel may hold
//! 16 times that, and what a call returns is lifted into host memory on top (a list of
//! millions of tiny arrays costs the host about twice its size in the guest). Two places
//! count against [`MemoryBudget`]:
//!
//! - **Linear memory**: every `memory.grow` of every instance takes the growth from the
//!   budget (`state::Limits`), and an instance gives it all back when it is dropped.
//!   Growth beyond the budget traps ("exceeded the total memory budget").
//! - **Results lifted into the host**: the data calls (`export-buffers`, `merge`,
//!   `get-results`) return [`Budgeted`] values. When wasmtime starts lifting one, the
//!   host reserves [`LIFT_FACTOR`] times what the call may hand back (its memory, at
//!   most `--max-memory`) and lets wasmtime lift only that much (its "hostcall fuel");
//!   the reservation is held until the values are converted into the host's arrays.
//!   More than that traps ("returned more data than ...").
//!
//! Other calls return only an error message or a description: they get a small fixed
//! allowance ([`CallKind`]) that is not counted.
//!
//! The lists of arrays a data call returns are [`Capped`]: their length is checked
//! against [`rules::MAX_BUFFERS`] before a single element is lifted, so a list of
//! millions of tiny arrays costs the host neither memory nor time.

use crate::udf::rules;
use std::cell::RefCell;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use wasmtime::ValRaw;
use wasmtime::component::__internal::{CanonicalAbiInfo, InstanceType, InterfaceType, LiftContext};
use wasmtime::component::{ComponentType, Lift};

/// Host bytes reserved per byte of "hostcall fuel": wasmtime counts a lifted list or
/// string by its length (`len * size_of::<T>()`), the allocator adds a header and
/// rounding to every allocation (up to 2.25 times the count for lists of tiny arrays),
/// and converting an array into the host's form copies it once more.
pub const LIFT_FACTOR: usize = 3;
/// What a data call may return beyond the size of the instance's linear memory: the
/// host's records are larger than the guest's (a few hundred declared buffers).
pub const LIFT_SLACK: usize = 1 << 20;
/// How long a lift waits for other lifts to give back their reservations before it
/// takes what is free.
const LIFT_PATIENCE: Duration = Duration::from_secs(10);

/// How often a growth waiting for the budget checks whether its call must stop (the
/// epoch tick: Ctrl-C and `--timeout` reach a waiting growth as soon as a running one).
const WAIT_SLICE: Duration = Duration::from_millis(10);

/// What [`MemoryBudget::take`] did.
#[derive(Debug)]
pub(crate) enum Take {
    Taken,
    /// The budget has no room (and no lift in flight will give any back in time).
    Exceeded,
    /// The growing call must stop (interrupted or timed out) while it waited.
    Stopped(wasmtime::Error),
}

/// What a call into a plugin may hand back to the host, by the kind of call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// `init`, `preprocess`, `process`, `postprocess`: nothing but an error message.
    Control,
    /// `describe`, `plan`, `result-buffers`: a description, choices, declarations.
    Declaration,
    /// `export-buffers`, `merge`, `get-results`: arrays, counted against the budget.
    Data,
}

impl CallKind {
    /// The hostcall fuel of a call of this kind (`max_memory` for data calls, whose
    /// [`Budgeted`] result lowers it when lifting starts).
    pub fn fuel(self, max_memory: usize) -> usize {
        match self {
            CallKind::Control => 1 << 20,
            CallKind::Declaration => 16 << 20,
            CallKind::Data => max_memory,
        }
    }

    /// What such a call returns, for messages.
    pub fn returns(self) -> &'static str {
        match self {
            CallKind::Control => "an error message",
            CallKind::Declaration => "a description, plan or buffer declarations",
            CallKind::Data => "arrays",
        }
    }
}

/// The default total budget: half the machine's memory (at least 1 GiB; 8 GiB where the
/// machine's memory cannot be read).
pub fn default_memory_total() -> usize {
    physical_memory().map_or(8 << 30, |m| (m / 2).max(1 << 30))
}

/// Physical memory in bytes, from `/proc/meminfo`.
fn physical_memory() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The memory budget shared by every instance of a runtime (see the module docs).
#[derive(Debug)]
pub struct MemoryBudget {
    limit: usize,
    state: Mutex<Usage>,
    released: Condvar,
}

#[derive(Debug, Default)]
struct Usage {
    /// Bytes taken: linear memories and lift reservations.
    used: usize,
    /// Lift reservations held now.
    lifting: usize,
}

impl MemoryBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(MemoryBudget { limit, state: Mutex::new(Usage::default()), released: Condvar::new() })
    }

    /// The limit in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes taken now.
    pub fn used(&self) -> usize {
        self.usage().used
    }

    fn usage(&self) -> std::sync::MutexGuard<'_, Usage> {
        // Nothing can panic while the lock is held: the counts stay consistent.
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Take `bytes` (linear memory or table growth). While lifts hold reservations
    /// (given back within moments), waits for them first: a transient lift must not make
    /// another instance's growth fail. The wait is interruptible: every
    /// [`WAIT_SLICE`] it asks `stop` whether the growing call must stop (interrupted, or
    /// past its timeout) and gives up with that reason.
    pub(crate) fn take(&self, bytes: usize, stop: &dyn Fn() -> Option<wasmtime::Error>) -> Take {
        let deadline = Instant::now() + LIFT_PATIENCE;
        let mut usage = self.usage();
        loop {
            match usage.used.checked_add(bytes) {
                Some(total) if total <= self.limit => {
                    usage.used = total;
                    return Take::Taken;
                }
                _ => {}
            }
            let now = Instant::now();
            // A plugin growing while its own call's results are lifted (its post-return)
            // would wait for itself.
            if usage.lifting == 0 || now >= deadline || lifting_here() {
                return Take::Exceeded;
            }
            if let Some(why) = stop() {
                return Take::Stopped(why);
            }
            usage = match self.released.wait_timeout(usage, (deadline - now).min(WAIT_SLICE)) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// Give back `bytes` taken before.
    pub(crate) fn give_back(&self, bytes: usize) {
        let mut usage = self.usage();
        usage.used = usage.used.saturating_sub(bytes);
        drop(usage);
        self.released.notify_all();
    }

    /// Reserve `wanted` bytes to lift a call's results: all of it if free; else, while
    /// other lifts hold reservations (they give them back within moments), wait for
    /// them; else what is free. The call then fails only if it really returns more.
    pub(crate) fn reserve_lift(self: &Arc<Self>, wanted: usize) -> LiftReservation {
        let deadline = Instant::now() + LIFT_PATIENCE;
        let mut usage = self.usage();
        loop {
            let free = self.limit.saturating_sub(usage.used);
            let now = Instant::now();
            if free >= wanted || usage.lifting == 0 || now >= deadline {
                let bytes = wanted.min(free);
                usage.used += bytes;
                usage.lifting += 1;
                return LiftReservation { budget: self.clone(), bytes };
            }
            usage = match self.released.wait_timeout(usage, deadline - now) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }
}

/// Bytes of the budget held while a call's results are lifted and converted; given
/// back when dropped.
#[derive(Debug)]
pub struct LiftReservation {
    budget: Arc<MemoryBudget>,
    bytes: usize,
}

impl LiftReservation {
    /// The bytes reserved.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for LiftReservation {
    fn drop(&mut self) {
        let mut usage = self.budget.usage();
        usage.used = usage.used.saturating_sub(self.bytes);
        usage.lifting = usage.lifting.saturating_sub(1);
        drop(usage);
        self.budget.released.notify_all();
    }
}

/// What the lifting of a data call's results found: the reservation to hold while
/// converting, and whether the budget (not the instance's memory) limited it.
#[derive(Debug, Default)]
pub struct LiftOutcome {
    pub reservation: Option<LiftReservation>,
    /// The fuel the lift was given, in bytes.
    pub allowed: usize,
    /// The budget gave less than the instance's memory would have allowed.
    pub limited_by_budget: bool,
}

/// The lift of the call in progress on this thread (calls into a plugin are
/// synchronous: set before the call, taken after it).
struct Gate {
    budget: Arc<MemoryBudget>,
    /// The store's hostcall fuel for the call.
    fuel: usize,
    /// The instance's memory limit.
    max_memory: usize,
    outcome: LiftOutcome,
}

thread_local! {
    static GATE: RefCell<Option<Gate>> = const { RefCell::new(None) };
}

/// Whether this thread holds a lift reservation now.
fn lifting_here() -> bool {
    GATE.with(|g| g.borrow().as_ref().is_some_and(|g| g.outcome.reservation.is_some()))
}

/// Run `call` (a data call whose store has `fuel` hostcall fuel) with its [`Budgeted`]
/// results counted against `budget`; also returns what the lift found.
pub(crate) fn lift_counted<R>(
    budget: &Arc<MemoryBudget>,
    fuel: usize,
    max_memory: usize,
    call: impl FnOnce() -> R,
) -> (R, LiftOutcome) {
    GATE.with(|g| {
        *g.borrow_mut() = Some(Gate { budget: budget.clone(), fuel, max_memory, outcome: LiftOutcome::default() })
    });
    let result = call();
    let outcome = GATE.with(|g| g.borrow_mut().take()).map(|g| g.outcome).unwrap_or_default();
    (result, outcome)
}

/// Reserve the budget for a lift that is starting and lower the lift's fuel to match.
fn admit(cx: &mut LiftContext<'_>) -> wasmtime::Result<()> {
    GATE.with(|g| {
        let mut gate = g.borrow_mut();
        let Some(gate) = gate.as_mut() else { return Ok(()) };
        // A plugin hands back what it holds: its memory (at most --max-memory) and a
        // little for the host's larger records.
        let wanted = gate.max_memory.min(cx.memory().len().saturating_add(LIFT_SLACK));
        let reservation = gate.budget.reserve_lift(wanted.saturating_mul(LIFT_FACTOR));
        let allowed = reservation.bytes() / LIFT_FACTOR;
        gate.outcome = LiftOutcome { reservation: Some(reservation), allowed, limited_by_budget: allowed < wanted };
        cx.consume_fuel(gate.fuel.saturating_sub(allowed))
    })
}

/// A data call's result, lifted only as far as the memory budget allows (see the module
/// docs). Outside [`lift_counted`] it lifts like `T`.
pub struct Budgeted<T>(pub T);

// SAFETY: the same component type, ABI and flat representation as `T`.
unsafe impl<T: ComponentType> ComponentType for Budgeted<T> {
    type Lower = T::Lower;

    const ABI: CanonicalAbiInfo = T::ABI;

    fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
        T::typecheck(ty, types)
    }
}

// SAFETY: lifts exactly as `T` does, after lowering the fuel left for it.
unsafe impl<T: Lift> Lift for Budgeted<T> {
    fn linear_lift_from_flat(cx: &mut LiftContext<'_>, ty: InterfaceType, src: &Self::Lower) -> wasmtime::Result<Self> {
        admit(cx)?;
        T::linear_lift_from_flat(cx, ty, src).map(Budgeted)
    }

    fn linear_lift_from_memory(cx: &mut LiftContext<'_>, ty: InterfaceType, bytes: &[u8]) -> wasmtime::Result<Self> {
        admit(cx)?;
        T::linear_lift_from_memory(cx, ty, bytes).map(Budgeted)
    }
}

/// A list a data call returns: at most [`rules::MAX_BUFFERS`] elements, checked before
/// any is lifted (a plugin declares no more buffers than that).
pub struct Capped<T>(pub Vec<T>);

/// A data call returned a longer list than [`Capped`] allows.
#[derive(Debug)]
pub struct TooMany(pub usize);

impl std::fmt::Display for TooMany {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "returned {} arrays; a plugin declares at most {} buffers", self.0, rules::MAX_BUFFERS)
    }
}

impl std::error::Error for TooMany {}

fn check_len(len: u32) -> wasmtime::Result<()> {
    let len = len as usize;
    if len > rules::MAX_BUFFERS {
        return Err(TooMany(len).into());
    }
    Ok(())
}

// SAFETY: the component type, ABI and flat representation of `list<T>` (a pointer and a
// length), as wasmtime's `Vec<T>`, whose checks the type goes through.
unsafe impl<T: ComponentType> ComponentType for Capped<T> {
    type Lower = [ValRaw; 2];

    const ABI: CanonicalAbiInfo = CanonicalAbiInfo::POINTER_PAIR;

    fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
        <[T] as ComponentType>::typecheck(ty, types)
    }
}

// SAFETY: lifts exactly as `Vec<T>` does, after reading the list's length (the second of
// the pointer pair, a 32-bit value, as wasmtime reads it) and refusing long lists.
unsafe impl<T: Lift> Lift for Capped<T> {
    fn linear_lift_from_flat(cx: &mut LiftContext<'_>, ty: InterfaceType, src: &Self::Lower) -> wasmtime::Result<Self> {
        check_len(src[1].get_u32())?;
        Vec::<T>::linear_lift_from_flat(cx, ty, src).map(Capped)
    }

    fn linear_lift_from_memory(cx: &mut LiftContext<'_>, ty: InterfaceType, bytes: &[u8]) -> wasmtime::Result<Self> {
        let len = bytes.get(4..8).and_then(|b| <[u8; 4]>::try_from(b).ok()).map(u32::from_le_bytes);
        check_len(len.ok_or_else(|| wasmtime::format_err!("a list's pointer pair is 8 bytes"))?)?;
        Vec::<T>::linear_lift_from_memory(cx, ty, bytes).map(Capped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never() -> Option<wasmtime::Error> {
        None
    }

    impl MemoryBudget {
        fn try_take(&self, bytes: usize) -> bool {
            matches!(self.take(bytes, &never), Take::Taken)
        }
    }

    #[test]
    fn takes_and_gives_back() {
        let budget = MemoryBudget::new(100);
        assert!(budget.try_take(60));
        assert!(!budget.try_take(41), "beyond the limit");
        assert!(budget.try_take(40));
        budget.give_back(60);
        assert_eq!(budget.used(), 40);
    }

    /// Issue 33, finding 10: a growth waiting for a lift to give back waited up to 10 s
    /// where neither `--timeout` nor Ctrl-C reached it. It stops when its call must.
    #[test]
    fn a_growth_waiting_for_a_lift_stops_when_its_call_is_interrupted() {
        let budget = MemoryBudget::new(100);
        let lift = budget.reserve_lift(90);
        let interrupted = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let growing = {
            let (budget, interrupted) = (budget.clone(), interrupted.clone());
            std::thread::spawn(move || {
                let stop = || {
                    interrupted.load(std::sync::atomic::Ordering::Relaxed).then(|| wasmtime::format_err!("interrupted"))
                };
                match budget.take(50, &stop) {
                    Take::Stopped(why) => why.to_string(),
                    other => format!("{other:?}"),
                }
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        interrupted.store(true, std::sync::atomic::Ordering::Relaxed);
        // The lift is still held: only the interrupt can end the wait.
        assert_eq!(growing.join().unwrap(), "interrupted");
        drop(lift);
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn a_lift_takes_what_is_free_when_no_other_lift_holds_any() {
        let budget = MemoryBudget::new(100);
        assert!(budget.try_take(70));
        let lift = budget.reserve_lift(50);
        assert_eq!(lift.bytes(), 30);
        assert_eq!(budget.used(), 100);
        drop(lift);
        assert_eq!(budget.used(), 70);
    }

    #[test]
    fn a_lift_waits_for_another_to_give_back() {
        let budget = MemoryBudget::new(100);
        let first = budget.reserve_lift(80);
        let waiting = {
            let budget = budget.clone();
            std::thread::spawn(move || budget.reserve_lift(50).bytes())
        };
        std::thread::sleep(Duration::from_millis(50));
        drop(first);
        assert_eq!(waiting.join().unwrap(), 50, "all of it once the first lift gave its share back");
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn growth_waits_for_a_lift_to_give_back() {
        let budget = MemoryBudget::new(100);
        assert!(budget.try_take(20));
        let lift = budget.reserve_lift(80);
        let growing = {
            let budget = budget.clone();
            std::thread::spawn(move || budget.try_take(30))
        };
        std::thread::sleep(Duration::from_millis(50));
        drop(lift);
        assert!(growing.join().unwrap(), "the growth fits once the lift is over");
        assert_eq!(budget.used(), 50);
        assert!(!budget.try_take(60), "without lifts in flight, a growth that does not fit fails at once");
    }

    #[test]
    fn the_default_is_a_share_of_the_machine() {
        let total = default_memory_total();
        assert!(total >= 1 << 30);
        if let Some(machine) = physical_memory() {
            assert!(total <= machine.max(2 << 30));
        }
    }
}
