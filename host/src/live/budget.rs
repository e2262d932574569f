//! The bound on frames held in memory between the receiver and the partitions, and the
//! back-pressure it applies: when it is full, the receiver stops reading from the
//! detector (TCP, ZeroMQ) until a partition finishes and frees its frames. Nothing is
//! dropped; the time spent waiting is counted ([`BufferStats`]).

use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How full the buffer got and how long the receiver waited for room.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BufferStats {
    /// The limit, in bytes.
    pub limit_bytes: u64,
    /// The most bytes of frames held at once.
    pub peak_bytes: u64,
    /// Times the receiver found the buffer full and stopped reading from the detector.
    pub back_pressure_waits: u64,
    /// Seconds it spent waiting in total.
    pub back_pressure_seconds: f64,
}

/// A byte budget shared by the receiver (which adds frames) and the partitions (which
/// release theirs when they finish).
#[derive(Debug)]
pub struct FrameBudget {
    state: Mutex<BufferStats>,
    used: Mutex<u64>,
    freed: Condvar,
}

impl FrameBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> Arc<Self> {
        Arc::new(FrameBudget {
            state: Mutex::new(BufferStats { limit_bytes: limit, ..BufferStats::default() }),
            used: Mutex::new(0),
            freed: Condvar::new(),
        })
    }

    fn used(&self) -> MutexGuard<'_, u64> {
        // A poisoned lock only means another thread panicked while adding a number.
        self.used.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn stats_mut(&self) -> MutexGuard<'_, BufferStats> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wait until the buffer has room for another frame (or holds nothing: one frame is
    /// always let in), checking `stop` every 50 ms. Returns `false` if `stop` was set.
    pub fn wait_for_room(&self, stop: &AtomicBool) -> bool {
        let limit = self.stats_mut().limit_bytes;
        let mut used = self.used();
        if *used == 0 || *used < limit {
            return true;
        }
        let started = Instant::now();
        while *used != 0 && *used >= limit {
            if stop.load(Ordering::Relaxed) {
                return false;
            }
            used = self.freed.wait_timeout(used, Duration::from_millis(50)).unwrap_or_else(|p| p.into_inner()).0;
        }
        drop(used);
        let mut stats = self.stats_mut();
        stats.back_pressure_waits += 1;
        stats.back_pressure_seconds += started.elapsed().as_secs_f64();
        true
    }

    /// Count `bytes` of a frame just received; they are released when the returned
    /// reservation (grown with [`Reservation::add`]) is dropped.
    pub fn reserve(self: &Arc<Self>, bytes: u64) -> Reservation {
        let mut r = Reservation { budget: self.clone(), bytes: 0 };
        r.add(bytes);
        r
    }

    fn add(&self, bytes: u64) {
        let mut used = self.used();
        *used += bytes;
        let now = *used;
        drop(used);
        let mut stats = self.stats_mut();
        stats.peak_bytes = stats.peak_bytes.max(now);
    }

    fn release(&self, bytes: u64) {
        let mut used = self.used();
        *used = used.saturating_sub(bytes);
        drop(used);
        self.freed.notify_all();
    }

    /// Bytes held now.
    pub fn held(&self) -> u64 {
        *self.used()
    }

    /// The statistics so far.
    pub fn stats(&self) -> BufferStats {
        self.stats_mut().clone()
    }
}

/// Bytes of frames held; released when dropped.
#[derive(Debug)]
pub struct Reservation {
    budget: Arc<FrameBudget>,
    bytes: u64,
}

impl Reservation {
    /// Hold `bytes` more.
    pub fn add(&mut self, bytes: u64) {
        self.budget.add(bytes);
        self.bytes += bytes;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.release(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_buffer_holds_the_receiver_until_a_partition_frees_its_frames() {
        let budget = FrameBudget::new(100);
        let stop = AtomicBool::new(false);
        assert!(budget.wait_for_room(&stop));
        let held = budget.reserve(120);
        let waiter = {
            let budget = budget.clone();
            std::thread::spawn(move || {
                let stop = AtomicBool::new(false);
                budget.wait_for_room(&stop)
            })
        };
        std::thread::sleep(Duration::from_millis(30));
        assert!(!waiter.is_finished(), "the receiver must wait while the buffer is over its limit");
        drop(held);
        assert!(waiter.join().unwrap());
        let stats = budget.stats();
        assert_eq!((stats.peak_bytes, stats.back_pressure_waits, budget.held()), (120, 1, 0));
    }

    #[test]
    fn waiting_ends_when_the_run_stops() {
        let budget = FrameBudget::new(10);
        let _held = budget.reserve(10);
        let stop = AtomicBool::new(true);
        assert!(!budget.wait_for_room(&stop));
    }
}
