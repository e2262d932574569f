//! Probe: exercises the contract from inside a plugin and records what it saw.
//!
//! Every `process_*` call checks the view shapes of API.md §3.1 and fails with a typed
//! error if one is wrong; the buffers record coverage, coordinates and indices so the
//! tests can check them against independent expectations.
//!
//! Params:
//! - `method`: tile | frame | partition (chosen at run time in `plan`)
//! - `dtype`: preferred input dtype (NumPy name) or `native`
//! - `violation`: none | undeclared | private | missing-result-only | wrong-kind | bad-mask —
//!   what `get_results` does wrong on purpose
//! - `mask`: none | false | per-nav | per-element — custom valid mask of `derived`
//! - `scale`: a float written into `scaled` for every frame (for parameter updates)
//!
//! Buffers (flat nav index n, sig pixel p):
//! - `visits` nav u32: process calls that covered frame n (tile: one per signal slice)
//! - `pixels` nav u64: pixels of frame n seen (must be the frame size)
//! - `coverage` sig u32: frames seen at pixel p
//! - `coords` nav (nav dims) u64: true nav coordinates of frame n
//! - `compressed` nav i64: compressed index of frame n as given by the tile origin
//! - `empty` nav (0,) f32: shape check only
//! - `tiles` single (2, 2) f64: [0][0] counts process calls, [1][1] partitions
//! - `scaled` nav f64: the `scale` param seen by the partition
//! - `scratch` nav u8, private
//! - `merges` single i64: custom merge calls
//! - `derived` nav f64, result only: `pixels` as float
//! - `sum` sig of the input dtype: Σ frames (for dtype checks)

use udf_sdk::prelude::*;
use udf_sdk::{DtypePreference, ParamValue, RunPlan, TileDepth, TileSize, dtype_from_name, with_numeric_type};

struct Contract {
    scale: f64,
    calls: u64,
}

fn shape(view: &ArrayViewMutD<'_, impl Copy>) -> Vec<usize> {
    view.shape().to_vec()
}

fn expect(what: &str, actual: Vec<usize>, expected: Vec<usize>) -> Result<()> {
    if actual == expected {
        Ok(())
    } else {
        Err(UdfError::internal(format!("view of {what}: shape {actual:?}, expected {expected:?}")))
    }
}

fn concat(a: &[usize], b: &[usize]) -> Vec<usize> {
    a.iter().chain(b).copied().collect()
}

impl Contract {
    /// Check every buffer's view for a unit of `frames` frames (`None`: a single frame)
    /// over signal shape `sig`, then record what the unit covers.
    #[allow(clippy::too_many_arguments)]
    fn visit(
        &mut self,
        ctx: &Context,
        frames: Option<usize>,
        sig: &[usize],
        origin: u64,
        coords: Vec<Vec<u64>>,
        data_pixels: usize,
        results: &mut Buffers,
    ) -> Result<()> {
        let nav_dims = ctx.dataset().nav_shape.len();
        let nav = |extra: &[usize]| match frames {
            Some(t) => concat(&[t], extra),
            None if extra.is_empty() => vec![1],
            None => extra.to_vec(),
        };
        let [visits, pixels, coverage, coord_buf, compressed, empty, tiles, scaled, scratch] = results.many_mut([
            "visits",
            "pixels",
            "coverage",
            "coords",
            "compressed",
            "empty",
            "tiles",
            "scaled",
            "scratch",
        ])?;
        let mut visits = visits.view_mut::<u32>()?;
        let mut pixels = pixels.view_mut::<u64>()?;
        let mut coverage = coverage.view_mut::<u32>()?;
        let mut coord_buf = coord_buf.view_mut::<u64>()?;
        let mut compressed = compressed.view_mut::<i64>()?;
        let empty = empty.view_mut::<f32>()?;
        let mut tiles = tiles.view_mut::<f64>()?;
        let mut scaled = scaled.view_mut::<f64>()?;
        let scratch = scratch.view_mut::<u8>()?;
        expect("visits", shape(&visits), nav(&[]))?;
        expect("coords", shape(&coord_buf), nav(&[nav_dims]))?;
        expect("empty", shape(&empty), nav(&[0]))?;
        expect("scratch", shape(&scratch), nav(&[]))?;
        expect("tiles", shape(&tiles), vec![2, 2])?;
        expect("coverage", shape(&coverage), sig.to_vec())?;
        let n = frames.unwrap_or(1);
        visits += 1;
        pixels += data_pixels as u64;
        coverage += n as u32;
        scaled.fill(self.scale);
        tiles[[0, 0]] += 1.0;
        let coord_rows = coord_buf.as_slice_mut().ok_or_else(|| UdfError::internal("coords view not contiguous"))?;
        for (row, c) in coord_rows.chunks_mut(nav_dims.max(1)).zip(&coords) {
            row.copy_from_slice(c);
        }
        for (i, v) in compressed.iter_mut().enumerate() {
            *v = (origin + i as u64) as i64;
        }
        self.calls += 1;
        Ok(())
    }

    fn add_sum(tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        with_numeric_type!(tile.dtype(), T => {
            let mut sum = results.view_mut::<T>("sum")?;
            for frame in tile.data::<T>()?.outer_iter() {
                Zip::from(&mut sum).and(&frame).for_each(|a, &b| *a += b);
            }
            Ok(())
        }, Ok(()))
    }
}

impl Udf for Contract {
    fn describe() -> Description {
        Description::new("contract", "0.1.0", "Checks the contract from inside and records what it saw")
            .methods(&[Method::Tile, Method::Frame, Method::Partition])
            .param(ParamSpec::text("method", "tile | frame | partition").default("tile"))
            .param(ParamSpec::text("dtype", "preferred input dtype or native").default("float32"))
            .param(ParamSpec::text("violation", "what get_results breaks on purpose").default("none"))
            .param(ParamSpec::text("mask", "custom valid mask of `derived`").default("none"))
            .param(ParamSpec::float("scale", "written to `scaled`").default(1.0))
            .custom_merge()
            .custom_results()
            .tiling(TileDepth::Default, TileSize::BestFit)
    }

    fn plan(params: &Params, _: &DatasetMeta) -> Result<RunPlan> {
        let method = match params.text("method")? {
            "tile" => Method::Tile,
            "frame" => Method::Frame,
            "partition" => Method::Partition,
            other => return Err(UdfError::bad_param(format!("method '{other}'"))),
        };
        let input_dtype = match params.text("dtype")? {
            "native" => DtypePreference::Native,
            name => DtypePreference::Prefer(
                dtype_from_name(name).ok_or_else(|| UdfError::bad_param(format!("dtype '{name}'")))?,
            ),
        };
        let mut plan = RunPlan::from_description(&Self::describe());
        plan.method = method;
        plan.input_dtype = input_dtype;
        Ok(plan)
    }

    fn result_buffers(params: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        let nav_dims = dataset.nav_shape.len() as u64;
        let mut decls = vec![
            BufferDecl::nav("visits", DType::Uint32),
            BufferDecl::nav("pixels", DType::Uint64),
            BufferDecl::sig("coverage", DType::Uint32),
            BufferDecl::nav("coords", DType::Uint64).extra_shape(&[nav_dims]),
            BufferDecl::nav("compressed", DType::Int64),
            BufferDecl::nav("empty", DType::Float32).extra_shape(&[0]),
            BufferDecl::single("tiles", DType::Float64).extra_shape(&[2, 2]),
            BufferDecl::nav("scaled", DType::Float64),
            BufferDecl::nav("scratch", DType::Uint8).private(),
            BufferDecl::single("merges", DType::Int64),
            BufferDecl::nav("derived", DType::Float64).result_only(),
            BufferDecl::sig("sum", dataset.input_dtype),
        ];
        if params.text("violation")? == "wrong-kind" {
            decls.retain(|d| d.name != "derived");
            decls.push(BufferDecl::nav("derived", DType::Int32).result_only());
        }
        Ok(decls)
    }

    fn new(ctx: &Context) -> Result<Self> {
        Ok(Contract { scale: ctx.params().float("scale")?, calls: 0 })
    }

    fn preprocess(&mut self, ctx: &Context, results: &mut Buffers) -> Result<()> {
        let p = ctx.partition().ok_or_else(|| UdfError::internal("preprocess without a partition"))?;
        let frames = p.frames as usize;
        let v = results.view_mut::<u32>("visits")?;
        expect("visits in preprocess", v.shape().to_vec(), vec![frames])?;
        let sig: Vec<usize> = ctx.dataset().sig_shape.iter().map(|&d| d as usize).collect();
        let c = results.view_mut::<u32>("coverage")?;
        expect("coverage in preprocess", c.shape().to_vec(), sig)?;
        if results.view::<u64>("pixels")?.iter().any(|&x| x != 0) {
            return Err(UdfError::internal("buffers are not zeroed before preprocess"));
        }
        Ok(())
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        if tile.dtype() != tile.context().input_dtype() {
            return Err(UdfError::internal("tile dtype is not the input dtype"));
        }
        let sig = tile.sig_shape().to_vec();
        let pixels = tile.frame_len();
        let ctx = tile.context();
        self.visit(ctx, Some(tile.frames()), &sig, tile.origin(), tile.coordinates(), pixels, results)?;
        Self::add_sum(tile, results)
    }

    fn process_frame(&mut self, frame: &Frame<'_>, results: &mut Buffers) -> Result<()> {
        let sig = frame.sig_shape().to_vec();
        let pixels: usize = sig.iter().product();
        let full: Vec<usize> = frame.context().dataset().sig_shape.iter().map(|&d| d as usize).collect();
        expect("frame", sig.clone(), full)?;
        self.visit(frame.context(), None, &sig, frame.nav_index(), vec![frame.coordinates()], pixels, results)?;
        with_numeric_type!(frame.dtype(), T => {
            let mut sum = results.view_mut::<T>("sum")?;
            Zip::from(&mut sum).and(&frame.data::<T>()?).for_each(|a, &b| *a += b);
            Ok(())
        }, Ok(()))
    }

    fn process_partition(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        let p = tile.context().partition().ok_or_else(|| UdfError::internal("no partition"))?;
        if tile.frames() as u64 != p.frames || tile.origin() != p.origin {
            return Err(UdfError::internal(format!(
                "partition tile has {} frames at {}, the partition {} at {}",
                tile.frames(),
                tile.origin(),
                p.frames,
                p.origin
            )));
        }
        let sig = tile.sig_shape().to_vec();
        let pixels = tile.frame_len();
        self.visit(tile.context(), Some(tile.frames()), &sig, tile.origin(), tile.coordinates(), pixels, results)?;
        Self::add_sum(tile, results)
    }

    fn postprocess(&mut self, _: &Context, results: &mut Buffers) -> Result<()> {
        results.view_mut::<f64>("tiles")?[[1, 1]] += 1.0;
        if self.calls == 0 {
            return Err(UdfError::internal("postprocess before any process call"));
        }
        Ok(())
    }

    fn merge(ctx: &MergeContext, dest: &mut Buffers, src: &Buffers) -> Result<()> {
        let start = ctx.partition.origin as usize;
        let end = start + ctx.partition.frames as usize;
        if ctx.valid_nav_mask[start..end].iter().any(|&v| v) {
            return Err(UdfError::internal("the valid mask in merge includes the partition being merged"));
        }
        for name in ["visits", "coverage"] {
            let mut d = dest.view_mut::<u32>(name)?;
            d += &src.view::<u32>(name)?;
        }
        for name in ["pixels", "coords"] {
            let mut d = dest.view_mut::<u64>(name)?;
            d += &src.view::<u64>(name)?;
        }
        dest.view_mut::<i64>("compressed")?.assign(&src.view::<i64>("compressed")?);
        dest.view_mut::<f64>("scaled")?.assign(&src.view::<f64>("scaled")?);
        dest.view_mut::<u8>("scratch")?.assign(&src.view::<u8>("scratch")?);
        let mut tiles = dest.view_mut::<f64>("tiles")?;
        tiles += &src.view::<f64>("tiles")?;
        dest.view_mut::<i64>("merges")?[[0]] += 1;
        with_numeric_type!(src.dtype("sum")?, T => {
            let mut d = dest.view_mut::<T>("sum")?;
            Zip::from(&mut d).and(&src.view::<T>("sum")?).for_each(|a, &b| *a += b);
            Ok(())
        }, Ok(()))
    }

    fn get_results(ctx: &ResultsContext, buffers: &Buffers) -> Result<Vec<ResultOut>> {
        let pixels = buffers.to_owned::<u64>("pixels")?;
        let derived = pixels.mapv(|p| p as f64);
        let frames = derived.len();
        let mut out = ResultOut::new("derived", derived.clone());
        out = match ctx.params.text("mask")? {
            "none" => out,
            "false" => out.with_mask(vec![false]),
            "per-nav" => out.with_mask((0..frames).map(|i| i % 2 == 0).collect()),
            "per-element" => out.with_mask((0..frames).map(|i| i % 3 == 0).collect()),
            other => return Err(UdfError::bad_param(format!("mask '{other}'"))),
        };
        let mut results = vec![out];
        match ctx.params.text("violation")? {
            "none" | "wrong-kind" => {}
            "undeclared" => results.push(ResultOut::new("surprise", derived)),
            "private" => results.push(buffers.pass_through("scratch")?),
            "missing-result-only" => results.clear(),
            "bad-mask" => results[0] = ResultOut::new("derived", derived).with_mask(vec![true; frames + 1]),
            other => return Err(UdfError::bad_param(format!("violation '{other}'"))),
        }
        if matches!(ctx.params.get("scale"), Some(ParamValue::Float(f)) if f.is_nan()) {
            return Err(UdfError::bad_param("scale is NaN"));
        }
        Ok(results)
    }
}

udf_sdk::export_udf!(Contract);
