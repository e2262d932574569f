//! Where host arrays keep their elements, and what they cost the plugin.
//!
//! | type | role |
//! |---|---|
//! | [`ArrayMemory`] | one per plugin instance (or Python session): charges every array's bytes to a [`MemoryLimit`], keeps a few freed buffers for the next temporaries, records the peak |
//! | [`Storage`] | the bytes of one array and of all its views: owned (charged, returned on drop) or a [`Lease`]d borrow of a tile the host is holding for the current call |
//! | [`Lease`] | revoked when the call that lent the tile returns: views of the tile then fail with [`ArrayError::Expired`] instead of reading freed memory |
//!
//! Freed buffers are kept (up to [`POOL_BUFFERS`], still charged) because allocating a
//! fresh megabyte costs page faults on every call: an eager chain over a 1 MiB tile ran
//! at 0.9 GB/s with fresh temporaries and 10 GB/s with reused ones (docs/benchmarks.md,
//! "Host arrays").

use super::error::ArrayError;
use crate::dtype::DType;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// Freed buffers kept for reuse per [`ArrayMemory`].
pub const POOL_BUFFERS: usize = 8;

/// What an instance's arrays may take: its own cap and the run's total budget.
pub trait MemoryLimit: Send + Sync {
    /// Take `bytes` more; `false` (and nothing taken) when they do not fit.
    fn try_take(&self, bytes: usize) -> bool;
    /// Give `bytes` back.
    fn give_back(&self, bytes: usize);
    /// About how many bytes could still be taken (for messages).
    fn available(&self) -> usize;
}

/// A limit of `bytes` in total: a wasm instance's `--max-memory` (its linear memories,
/// tables and host arrays together), the in-process Python module's, tests'.
#[derive(Debug)]
pub struct FixedLimit {
    limit: usize,
    used: AtomicUsize,
}

impl FixedLimit {
    pub fn new(limit: usize) -> Self {
        FixedLimit { limit, used: AtomicUsize::new(0) }
    }

    /// The limit in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }
}

impl MemoryLimit for FixedLimit {
    fn try_take(&self, bytes: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| u.checked_add(bytes).filter(|&n| n <= self.limit))
            .is_ok()
    }

    fn give_back(&self, bytes: usize) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }

    fn available(&self) -> usize {
        self.limit.saturating_sub(self.used.load(Ordering::Acquire))
    }
}

/// The memory of one plugin instance's arrays.
pub struct ArrayMemory {
    limit: Box<dyn MemoryLimit>,
    pool: Mutex<Vec<Vec<u128>>>,
    /// Bytes charged: live buffers and pooled ones.
    charged: AtomicUsize,
    peak: AtomicUsize,
}

impl std::fmt::Debug for ArrayMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArrayMemory").field("charged", &self.charged()).field("peak", &self.peak()).finish()
    }
}

impl ArrayMemory {
    pub fn new(limit: Box<dyn MemoryLimit>) -> Arc<Self> {
        Arc::new(ArrayMemory { limit, pool: Mutex::default(), charged: AtomicUsize::new(0), peak: AtomicUsize::new(0) })
    }

    /// Memory without a limit beyond `bytes` (tests, in-process use).
    pub fn with_limit(bytes: usize) -> Arc<Self> {
        Self::new(Box::new(FixedLimit::new(bytes)))
    }

    /// Bytes charged now (arrays alive and buffers kept for reuse).
    pub fn charged(&self) -> usize {
        self.charged.load(Ordering::Acquire)
    }

    /// The most bytes charged at once.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Acquire)
    }

    /// Give back the buffers kept for reuse; whether there were any.
    pub fn trim(&self) -> bool {
        let drained: Vec<Vec<u128>> = self.pool.lock().map(|mut p| std::mem::take(&mut *p)).unwrap_or_default();
        let any = !drained.is_empty();
        for words in drained {
            self.release(words.capacity() * 16);
        }
        any
    }

    fn charge(&self, op: &str, shape: &[usize], bytes: usize) -> Result<(), ArrayError> {
        // Buffers kept for reuse count too: give them back before refusing.
        let taken = self.limit.try_take(bytes) || (self.trim() && self.limit.try_take(bytes));
        if !taken {
            return Err(ArrayError::Memory {
                op: op.into(),
                shape: shape.to_vec(),
                bytes: bytes as u128,
                available: self.limit.available(),
            });
        }
        let now = self.charged.fetch_add(bytes, Ordering::AcqRel) + bytes;
        self.peak.fetch_max(now, Ordering::AcqRel);
        Ok(())
    }

    fn release(&self, bytes: usize) {
        self.charged.fetch_sub(bytes, Ordering::AcqRel);
        self.limit.give_back(bytes);
    }

    /// Take `bytes` from the limit while the returned guard lives: memory the arrays
    /// need outside a [`Storage`] (a copy handed out by `to_bytes`).
    pub fn reserve(&self, op: &str, shape: &[usize], bytes: usize) -> Result<Reservation<'_>, ArrayError> {
        self.charge(op, shape, bytes)?;
        Ok(Reservation { memory: self, bytes })
    }

    /// A buffer for `len` elements of `dtype` (`shape` for messages); zeroed if asked,
    /// else with unspecified contents.
    pub fn allocate(
        self: &Arc<Self>,
        op: &str,
        dtype: DType,
        shape: &[usize],
        zeroed: bool,
    ) -> Result<Arc<Storage>, ArrayError> {
        let bytes = array_bytes(op, dtype, shape)?;
        let too_big = || ArrayError::Memory {
            op: op.into(),
            shape: shape.to_vec(),
            bytes: bytes as u128,
            available: self.limit.available(),
        };
        let words_needed = bytes.div_ceil(16);
        let reused = self.pool.lock().ok().and_then(|mut pool| {
            let i = pool.iter().position(|w| w.capacity() >= words_needed && w.capacity() <= words_needed * 2 + 64)?;
            Some(pool.swap_remove(i))
        });
        let words = match reused {
            Some(mut words) => {
                if zeroed {
                    words.clear();
                }
                words.resize(words_needed, 0);
                words
            }
            None => {
                self.charge(op, shape, words_needed * 16)?;
                match fresh_words(words_needed) {
                    Some(words) => words,
                    None => {
                        self.release(words_needed * 16);
                        return Err(too_big());
                    }
                }
            }
        };
        Ok(Arc::new(Storage {
            bytes: StorageBytes::Owned { words: RwLock::new(words), len: bytes, memory: self.clone() },
            read_only: false,
        }))
    }

    fn recycle(&self, words: Vec<u128>) {
        let capacity = words.capacity() * 16;
        if let Ok(mut pool) = self.pool.lock()
            && pool.len() < POOL_BUFFERS
            && capacity > 0
        {
            pool.push(words);
            return;
        }
        self.release(capacity);
    }
}

/// `n` zeroed words from the global allocator, or `None` when they cannot be had.
///
/// Zeroed by the allocator (`calloc`: a fresh mapping is zero already, no pass over it),
/// and a large buffer asks for transparent huge pages before anything touches it, as
/// NumPy does: a fresh 512 MiB temporary (a class's `tile.astype(np.float64)` of a
/// whole-partition tile) otherwise costs 131072 page faults of 4 KiB when first written,
/// and perf put 60% of such an `astype` in the kernel's fault handling.
fn fresh_words(n: usize) -> Option<Vec<u128>> {
    if n == 0 {
        return Some(Vec::new());
    }
    let layout = std::alloc::Layout::array::<u128>(n).ok()?;
    // SAFETY: the layout's size is not zero (n > 0).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<u128>();
    if ptr.is_null() {
        return None;
    }
    advise_huge_pages(ptr.cast(), layout.size());
    // SAFETY: `ptr` comes from the global allocator with the layout of `[u128; n]`
    // (capacity `n`), and its bytes are zero, a valid `u128`: all `n` are initialized.
    Some(unsafe { Vec::from_raw_parts(ptr, n, n) })
}

/// Ask the kernel to back the whole pages of `len` bytes at `start` with huge pages
/// (`madvise(MADV_HUGEPAGE)`) when they are 4 MiB or more (NumPy's threshold); a refusal
/// (THP off, an old kernel) changes nothing but speed.
#[cfg(target_os = "linux")]
fn advise_huge_pages(start: *mut u8, len: usize) {
    const PAGE: usize = 4096;
    if len < 4 << 20 {
        return;
    }
    let offset = (start as usize).next_multiple_of(PAGE) - start as usize;
    let whole = (len - offset) / PAGE * PAGE;
    // SAFETY: the range lies inside the allocation of `len` bytes at `start` (its whole
    // pages only), which this module owns; MADV_HUGEPAGE is advice about how the kernel
    // backs those pages and changes neither their contents nor their mapping.
    let _ = unsafe { rustix::mm::madvise(start.add(offset).cast(), whole, rustix::mm::Advice::LinuxHugepage) };
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_start: *mut u8, _len: usize) {}

impl Drop for ArrayMemory {
    /// The buffers kept for reuse go back to the limit with the memory: the run's total
    /// budget outlives every instance.
    fn drop(&mut self) {
        self.trim();
    }
}

/// Bytes taken from an [`ArrayMemory`]'s limit until dropped ([`ArrayMemory::reserve`]).
pub struct Reservation<'a> {
    memory: &'a ArrayMemory,
    bytes: usize,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        self.memory.release(self.bytes);
    }
}

/// The bytes of an array of `dtype` and `shape` — a new one or a view — or an error
/// when they are more than an allocation can hold: as NumPy ("array is too big"), the
/// non-zero lengths multiplied by the item size must fit in `isize::MAX`, even when
/// another length is 0. A broadcast view claims them without taking them, and
/// whatever copies it does.
pub fn array_bytes(op: &str, dtype: DType, shape: &[usize]) -> Result<usize, ArrayError> {
    check_ndim(op, shape)?;
    let too_big = || ArrayError::Memory {
        op: op.into(),
        shape: shape.to_vec(),
        bytes: shape.iter().filter(|&&d| d != 0).fold(dtype.size() as u128, |n, &d| n.saturating_mul(d as u128)),
        available: 0,
    };
    let bytes = shape
        .iter()
        .filter(|&&d| d != 0)
        .try_fold(dtype.size(), |n, &d| n.checked_mul(d))
        .filter(|&bytes| isize::try_from(bytes).is_ok())
        .ok_or_else(too_big)?;
    Ok(if shape.contains(&0) { 0 } else { bytes })
}

/// The most dimensions an array has (NumPy 2's limit): operations that loop over
/// combinations of axes (`fftshift`'s 2^axes blocks) stay bounded.
pub const MAX_NDIM: usize = 64;

/// An error unless `shape` has at most [`MAX_NDIM`] dimensions.
pub fn check_ndim(op: &str, shape: &[usize]) -> Result<(), ArrayError> {
    if shape.len() > MAX_NDIM {
        return Err(ArrayError::value(
            op,
            format!("{} dimensions are more than the {MAX_NDIM} an array can have", shape.len()),
        ));
    }
    Ok(())
}

/// The number of elements of `shape`, or an error when its non-zero lengths multiplied
/// overflow (NumPy refuses `zeros((0, 2**62, 2**62))` too) or it has more than
/// [`MAX_NDIM`] dimensions.
pub fn element_count(op: &str, shape: &[usize]) -> Result<usize, ArrayError> {
    array_bytes(op, DType::U8, shape)
}

/// A borrow of memory the host holds for the duration of one call.
#[derive(Debug, Default)]
pub struct Lease {
    revoked: AtomicBool,
}

impl Lease {
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// End the borrow: every view of the lent memory fails from now on.
    pub fn revoke(&self) {
        self.revoked.store(true, Ordering::Release);
    }

    fn alive(&self) -> bool {
        !self.revoked.load(Ordering::Acquire)
    }
}

/// The bytes of an array and its views.
pub struct Storage {
    bytes: StorageBytes,
    /// Writes fail as into a lent tile (the converted copy of a tile).
    read_only: bool,
}

enum StorageBytes {
    Owned { words: RwLock<Vec<u128>>, len: usize, memory: Arc<ArrayMemory> },
    Borrowed { ptr: *const u8, len: usize, lease: Arc<Lease> },
}

// SAFETY: `Borrowed` points at memory the host keeps alive and unchanged while the
// lease is alive (`Storage::borrowed`'s contract); it is only read, through `read`,
// which checks the lease. Owned bytes are behind a lock.
unsafe impl Send for Storage {}
// SAFETY: as for `Send`: shared access only reads borrowed memory.
unsafe impl Sync for Storage {}

impl Drop for Storage {
    fn drop(&mut self) {
        if let StorageBytes::Owned { words, memory, .. } = &mut self.bytes {
            let words = std::mem::take(words.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner()));
            memory.recycle(words);
        }
    }
}

/// Read access to a storage's bytes.
pub enum ReadBytes<'a> {
    Owned(RwLockReadGuard<'a, Vec<u128>>, usize),
    Borrowed(&'a [u8]),
}

impl std::ops::Deref for ReadBytes<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            ReadBytes::Owned(words, len) => &bytemuck::cast_slice(words.as_slice())[..*len],
            ReadBytes::Borrowed(bytes) => bytes,
        }
    }
}

/// Write access to an owned storage's bytes.
pub struct WriteBytes<'a>(RwLockWriteGuard<'a, Vec<u128>>, usize);

impl std::ops::Deref for WriteBytes<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &bytemuck::cast_slice(self.0.as_slice())[..self.1]
    }
}

impl std::ops::DerefMut for WriteBytes<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut bytemuck::cast_slice_mut(self.0.as_mut_slice())[..self.1]
    }
}

impl Storage {
    /// Lend `bytes` to arrays until `lease` is revoked.
    ///
    /// # Safety
    /// `bytes` must stay valid and unchanged until `lease` is revoked, and the lease
    /// must be revoked before the memory is freed or written.
    pub unsafe fn borrowed(bytes: &[u8], lease: Arc<Lease>) -> Arc<Storage> {
        Arc::new(Storage {
            bytes: StorageBytes::Borrowed { ptr: bytes.as_ptr(), len: bytes.len(), lease },
            read_only: true,
        })
    }

    /// Bytes held.
    pub fn len(&self) -> usize {
        match &self.bytes {
            StorageBytes::Owned { len, .. } | StorageBytes::Borrowed { len, .. } => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The address of the first byte (alignment checks).
    pub fn is_borrowed(&self) -> bool {
        matches!(self.bytes, StorageBytes::Borrowed { .. })
    }

    /// Read the bytes.
    ///
    /// # Errors
    /// [`ArrayError::Expired`] for a tile whose call has returned.
    pub fn read(&self, op: &str) -> Result<ReadBytes<'_>, ArrayError> {
        match &self.bytes {
            StorageBytes::Owned { words, len, .. } => {
                let guard = words.read().map_err(|_| ArrayError::value(op, "an earlier write failed"))?;
                Ok(ReadBytes::Owned(guard, *len))
            }
            StorageBytes::Borrowed { ptr, len, lease } => {
                if !lease.alive() {
                    return Err(ArrayError::Expired { op: op.into() });
                }
                // SAFETY: the lease is alive, so the lender keeps `len` bytes at `ptr`
                // valid and unchanged (`Storage::borrowed`'s contract).
                Ok(ReadBytes::Borrowed(unsafe { std::slice::from_raw_parts(*ptr, *len) }))
            }
        }
    }

    /// Write the bytes (owned storage only: tiles are read-only).
    pub fn write(&self, op: &str) -> Result<WriteBytes<'_>, ArrayError> {
        match &self.bytes {
            StorageBytes::Owned { words, len, .. } if !self.read_only => {
                let guard = words.try_write().map_err(|_| {
                    ArrayError::value(op, "the array is being read by the same operation; write a copy")
                })?;
                Ok(WriteBytes(guard, *len))
            }
            StorageBytes::Owned { .. } | StorageBytes::Borrowed { .. } => {
                Err(ArrayError::value(op, "a tile (and any view of it) is read-only; write into an array of your own"))
            }
        }
    }

    /// Make writes fail from now on, as into a lent tile.
    pub(crate) fn freeze(&mut self) {
        self.read_only = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A limit shared with whoever made it, to look at after the memory is gone.
    struct Shared(Arc<FixedLimit>);

    impl MemoryLimit for Shared {
        fn try_take(&self, bytes: usize) -> bool {
            self.0.try_take(bytes)
        }
        fn give_back(&self, bytes: usize) {
            self.0.give_back(bytes)
        }
        fn available(&self) -> usize {
            self.0.available()
        }
    }

    /// Issue 32: the buffers kept for reuse stayed charged to the run's total budget
    /// after their instance was gone (8 MiB of a 64 MiB budget per instance that made
    /// 1 MiB temporaries), until the budget ran out.
    #[test]
    fn buffers_kept_for_reuse_are_given_back_with_the_memory() {
        let limit = Arc::new(FixedLimit::new(64 << 20));
        let memory = ArrayMemory::new(Box::new(Shared(limit.clone())));
        let buffers: Vec<_> = (0..4).map(|_| memory.allocate("zeros", DType::F32, &[1 << 18], true).unwrap()).collect();
        drop(buffers);
        assert_eq!(limit.available(), (64 << 20) - (4 << 20), "kept for reuse, still charged");
        assert!(memory.trim() && !memory.trim(), "trimmed once");
        assert_eq!(limit.available(), 64 << 20);
        let kept = memory.allocate("zeros", DType::F32, &[1 << 18], true).unwrap();
        drop(kept);
        drop(memory);
        assert_eq!(limit.available(), 64 << 20, "the memory gave its pool back when dropped");
    }

    /// An allocation the limit refuses gives the pooled buffers back and tries again.
    #[test]
    fn a_refused_allocation_first_gives_back_the_pool() {
        let memory = ArrayMemory::with_limit(3 << 20);
        drop(memory.allocate("zeros", DType::F32, &[1 << 18], true).unwrap());
        drop(memory.allocate("zeros", DType::F32, &[1 << 18], true).unwrap());
        assert_eq!(memory.charged(), 1 << 20, "one 1 MiB buffer kept for reuse");
        let big = memory.allocate("zeros", DType::F32, &[3 << 18], true).expect("fits once the pool is empty");
        assert_eq!(memory.charged(), 3 << 20);
        drop(big);
    }

    /// A fresh large buffer (zeroed by the allocator, huge pages advised) holds zeros and
    /// keeps what is written to it, at both ends; so does a small one.
    #[test]
    fn fresh_buffers_are_zeroed_and_writable_large_or_small() {
        let memory = ArrayMemory::with_limit(64 << 20);
        for elements in [3usize, (9 << 20) / 4 + 3] {
            let storage = memory.allocate("empty", DType::F32, &[elements], false).unwrap();
            {
                let bytes = storage.read("empty").unwrap();
                assert_eq!(bytes.len(), elements * 4);
                assert!(bytes.iter().all(|&b| b == 0), "{elements} elements: not zeroed");
            }
            let mut w = storage.write("empty").unwrap();
            let last = w.len() - 1;
            w[0] = 7;
            w[last] = 9;
            drop(w);
            let bytes = storage.read("empty").unwrap();
            assert_eq!((bytes[0], bytes[last]), (7, 9));
        }
    }
}
