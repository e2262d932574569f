//! LiberTEM's `MySumUDF` and `MySumMergeUDF` (docs: `dask.rst`, "Merge function for
//! Dask array results"; the `merge_all` of `udf/advanced.rst` sums the same buffer):
//! the sum of all frames. `merge` is pure here and the host may tree-reduce it, so the
//! one-step `merge_all` of `MySumMergeUDF` needs no counterpart.
//!
//! Buffer `intensity` (kind sig, input dtype): `intensity[y, x] = Σ_n F_n[y, x]`.

use udf_sdk::prelude::*;

struct MySumUdf;

impl Udf for MySumUdf {
    fn declare() -> Declaration {
        Declaration::new("my-sum", "Sum of all frames").sig("intensity", BufferDType::Input).merge(Merge::Add)
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(MySumUdf)
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        results.accumulate("intensity", tile, Merge::Add)
    }
}

udf_sdk::export_udf!(MySumUdf);
