//! What crosses process boundaries: run plans (`Plan::from_json`, read by `run-partition`
//! and Dask workers) and partition outputs (`PartitionOutput::from_bytes`, read where the
//! run is merged), from arbitrary bytes. The first byte picks which.
#![no_main]

use libfuzzer_sys::fuzz_target;
use udf_host::exec::{PartitionOutput, Plan};

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else { return };
    if which % 2 == 0 {
        if let Ok(text) = std::str::from_utf8(rest)
            && let Ok(plan) = Plan::from_json(text)
        {
            // A plan that reads back is consistent: every partition it lists is there.
            for index in plan.partition_indices().collect::<Vec<_>>() {
                let _ = plan.partition(index);
            }
            let _ = plan.to_json();
        }
    } else if let Ok(output) = PartitionOutput::from_bytes(rest) {
        let _ = output.to_bytes();
    }
});
