//! Tiles read straight into a plugin's linear memory.
//!
//! The generated bindings lower a tile from a host slice, so a tile the executor has to
//! gather (a signal slice) or convert (stored integers read as float32) used to cross
//! memory twice: read into the executor's buffer, then copied by wasmtime into the
//! guest. [`GuestTile`] has the component type of the contract's `tile` record, but its
//! data lowers by allocating the list in the guest (the guest's `cabi_realloc`, as for
//! any list) and reading the tile into that allocation: one pass instead of two.
//!
//! Lowering by hand uses wasmtime's hidden API (`ComponentType`'s ABI constants,
//! `LowerContext`), one reason wasmtime is pinned to an exact version. The type is
//! checked against the plugin's `process` signature when an instance is created (and by
//! the tests, which pass every dtype through it).

use super::bindings::udf::plugin::types as wit;
use super::convert::array_case;
use crate::dtype::DType;
use crate::udf::{DataAccess, TileSource};
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use wasmtime::ValRaw;
use wasmtime::component::__internal::{CanonicalAbiInfo, InstanceType, InterfaceType, LowerContext};
use wasmtime::component::{ComponentType, Lower};

/// Writes a tile's bytes into the slice it is given (exactly the tile's size). A read
/// failure travels through the lowering as the [`crate::udf::TileReadError`] inside a
/// `wasmtime::Error`, which the caller downcasts.
pub type ReadInto<'a> = dyn TileSource + 'a;

/// A `list<E>` whose bytes are written by `read` into the guest's allocation.
pub struct ReadList<'a, E> {
    /// Elements of the list (`E`s, not bytes).
    len: usize,
    /// Alignment asked of the guest's allocator: the element's, or the tile dtype's when
    /// that is stricter (a tile sent as `list<u8>` is written as its dtype).
    align: u32,
    read: &'a ReadInto<'a>,
    element: PhantomData<fn() -> E>,
}

impl<'a, E: ComponentType> ReadList<'a, E> {
    /// A list of `bytes / size_of(E)` elements holding elements of `dtype`.
    fn new(bytes: usize, dtype: DType, read: &'a ReadInto<'a>) -> Self {
        let align = E::ALIGN32.max(dtype.size().min(8) as u32);
        ReadList { len: bytes / E::SIZE32, align, read, element: PhantomData }
    }

    /// Allocate the list in the guest and read the tile into it; the list's address.
    /// A stricter alignment than the canonical ABI's is what any `cabi_realloc` must
    /// honour, and wasmtime rejects a result that does not.
    fn store<T>(&self, cx: &mut LowerContext<'_, T>) -> wasmtime::Result<usize> {
        let size = self.len.checked_mul(E::SIZE32).ok_or_else(|| wasmtime::format_err!("tile too large"))?;
        let ptr = cx.realloc(0, 0, self.align, size)?;
        let dst = cx
            .as_slice_mut()
            .get_mut(ptr..)
            .and_then(|rest| rest.get_mut(..size))
            .ok_or_else(|| wasmtime::format_err!("realloc return: beyond end of memory"))?;
        self.read.read_into(dst)?;
        Ok(ptr)
    }
}

// SAFETY: the same ABI as wasmtime's own `[E]` (a pointer and a length, checked against
// the component's type by `[E]`'s typecheck).
unsafe impl<E: ComponentType> ComponentType for ReadList<'_, E> {
    type Lower = [ValRaw; 2];

    const ABI: CanonicalAbiInfo = CanonicalAbiInfo::POINTER_PAIR;

    fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> wasmtime::Result<()> {
        <[E] as ComponentType>::typecheck(ty, types)
    }
}

// SAFETY: lowers exactly as wasmtime's `[E]` does: allocate with the guest's realloc at
// the element's alignment, fill `len * size` bytes inside memory, pass (pointer, length)
// as two 64-bit flat values or two little-endian u32 in memory.
unsafe impl<E: ComponentType> Lower for ReadList<'_, E> {
    fn linear_lower_to_flat<T>(
        &self,
        cx: &mut LowerContext<'_, T>,
        _ty: InterfaceType,
        dst: &mut MaybeUninit<[ValRaw; 2]>,
    ) -> wasmtime::Result<()> {
        let ptr = self.store(cx)?;
        dst.write([ValRaw::i64(ptr as i64), ValRaw::i64(self.len as i64)]);
        Ok(())
    }

    fn linear_lower_to_memory<T>(
        &self,
        cx: &mut LowerContext<'_, T>,
        _ty: InterfaceType,
        offset: usize,
    ) -> wasmtime::Result<()> {
        let ptr = u32::try_from(self.store(cx)?)?;
        let len = u32::try_from(self.len)?;
        *cx.get::<4>(offset) = ptr.to_le_bytes();
        *cx.get::<4>(offset + 4) = len.to_le_bytes();
        Ok(())
    }
}

/// The contract's `array-data`, its list read into the guest.
#[derive(ComponentType, Lower)]
#[component(variant)]
pub enum GuestArrayData<'a> {
    // Boolean tiles go as bytes, as `array_data` sends them; the case is here for the type.
    #[expect(dead_code, reason = "part of the contract's type, never sent")]
    #[component(name = "boolean")]
    Boolean(ReadList<'a, bool>),
    #[component(name = "uint8")]
    Uint8(ReadList<'a, u8>),
    #[component(name = "uint16")]
    Uint16(ReadList<'a, u16>),
    #[component(name = "uint32")]
    Uint32(ReadList<'a, u32>),
    #[component(name = "uint64")]
    Uint64(ReadList<'a, u64>),
    #[component(name = "int8")]
    Int8(ReadList<'a, i8>),
    #[component(name = "int16")]
    Int16(ReadList<'a, i16>),
    #[component(name = "int32")]
    Int32(ReadList<'a, i32>),
    #[component(name = "int64")]
    Int64(ReadList<'a, i64>),
    #[component(name = "float32")]
    Float32(ReadList<'a, f32>),
    #[component(name = "float64")]
    Float64(ReadList<'a, f64>),
    #[component(name = "complex64")]
    Complex64(ReadList<'a, f32>),
    #[component(name = "complex128")]
    Complex128(ReadList<'a, f64>),
    #[component(name = "bytes")]
    Bytes(ReadList<'a, u8>),
}

impl<'a> GuestArrayData<'a> {
    /// `bytes` bytes of `dtype`, in the case [`array_case!`] chooses (as for the
    /// bindings' arrays).
    pub fn new(dtype: DType, access: DataAccess, bytes: usize, read: &'a ReadInto<'a>) -> Self {
        use GuestArrayData as G;
        array_case!(G, dtype, access, ReadList::new(bytes, dtype, read))
    }
}

/// The contract's `tile` record with its data read into the guest.
#[derive(ComponentType, Lower)]
#[component(record)]
pub struct GuestTile<'a> {
    pub origin: u64,
    pub frames: u64,
    #[component(name = "scheme-index")]
    pub scheme_index: u32,
    pub sig: wit::SigSlice<'a>,
    #[component(name = "true-nav-indices")]
    pub true_nav_indices: &'a [u64],
    pub data: GuestArrayData<'a>,
}

/// `process`'s parameters and results, with the tile read into the guest.
pub type ProcessParams<'a> = (GuestTile<'a>,);
pub type ProcessResults = (Result<(), wit::UdfError>,);
