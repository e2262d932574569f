//! Broken on purpose: right without a ROI, wrong with one — the mistakes the ROI checks
//! must still catch now that they keep the scan's geometry. Param `bug`:
//!
//! - `nav-len`: the mean frame (`mean`, sig, float64, result-only, from a float32 `sum`)
//!   divides by the scan's size instead of the number of frames processed (the ROI
//!   count). Caught by `roi.subset` against the selected frames alone.
//! - `compressed-coords`: the scan coordinates of each frame (`coords`, nav, int64, one
//!   per nav axis) computed from its compressed index (the tile origin) instead of its
//!   true index. Caught by `roi.subset` against a run without ROI.

use udf_sdk::prelude::*;

#[derive(Clone, Copy, PartialEq)]
enum Bug {
    NavLen,
    CompressedCoords,
}

fn bug(params: &Params) -> Result<Bug> {
    match params.text("bug")? {
        "nav-len" => Ok(Bug::NavLen),
        "compressed-coords" => Ok(Bug::CompressedCoords),
        other => Err(UdfError::bad_param(format!("bug '{other}' is not nav-len or compressed-coords"))),
    }
}

struct BrokenRoi {
    bug: Bug,
}

impl Udf for BrokenRoi {
    fn describe() -> Description {
        Description::new("broken-roi", "0.1.0", "Right without a ROI, wrong with one")
            .param(ParamSpec::text("bug", "nav-len | compressed-coords").default("nav-len"))
            .custom_merge()
            .custom_results()
    }

    fn result_buffers(params: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        Ok(match bug(params)? {
            Bug::NavLen => {
                vec![
                    BufferDecl::sig("sum", DType::Float32).private(),
                    BufferDecl::sig("mean", DType::Float64).result_only(),
                ]
            }
            Bug::CompressedCoords => {
                vec![BufferDecl::nav("coords", DType::Int64).extra_shape(&[dataset.nav_shape.len() as u64])]
            }
        })
    }

    fn new(ctx: &Context) -> Result<Self> {
        Ok(BrokenRoi { bug: bug(ctx.params())? })
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        match self.bug {
            Bug::NavLen => {
                let mut sum = results.view_mut::<f32>("sum")?;
                for frame in tile.data::<f32>()?.outer_iter() {
                    sum += &frame;
                }
            }
            Bug::CompressedCoords => {
                let dataset = tile.context().dataset();
                let mut coords = results.view_mut::<i64>("coords")?;
                for (i, mut row) in coords.outer_iter_mut().enumerate() {
                    // The bug: the compressed index is not the position in the scan.
                    let wrong = dataset.nav_coordinates(tile.origin() + i as u64);
                    for (c, v) in row.iter_mut().zip(wrong) {
                        *c = v as i64;
                    }
                }
            }
        }
        Ok(())
    }

    fn merge(_: &MergeContext, dest: &mut Buffers, src: &Buffers) -> Result<()> {
        if src.names().any(|n| n == "sum") {
            let mut sum = dest.view_mut::<f32>("sum")?;
            sum += &src.view::<f32>("sum")?;
        } else {
            dest.view_mut::<i64>("coords")?.assign(&src.view::<i64>("coords")?);
        }
        Ok(())
    }

    fn get_results(ctx: &ResultsContext, buffers: &Buffers) -> Result<Vec<ResultOut>> {
        if !buffers.names().any(|n| n == "sum") {
            return Ok(Vec::new());
        }
        // The bug: the scan's size, not `ctx.dataset.frames()`.
        let frames = ctx.dataset.nav_len() as f64;
        let mean = buffers.view::<f32>("sum")?.mapv(|s| f64::from(s) / frames);
        Ok(vec![ResultOut::new("mean", mean)])
    }
}

udf_sdk::export_udf!(BrokenRoi);
