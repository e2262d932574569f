//! A plugin declared in one place: [`Declaration`].
//!
//! ```
//! # use udf_sdk::prelude::*;
//! struct MaxUdf;
//!
//! impl Udf for MaxUdf {
//!     fn declare() -> Declaration {
//!         Declaration::new("max", "Maximum of all frames")
//!             .method(Method::Frame)
//!             .sig("maxbuf", BufferDType::Input)
//!             .merge(Merge::Max)
//!     }
//!     fn new(_: &Context) -> Result<Self> {
//!         Ok(MaxUdf)
//!     }
//!     fn process_frame(&mut self, frame: &Frame<'_>, results: &mut Buffers) -> Result<()> {
//!         results.accumulate("maxbuf", frame, Merge::Max)
//!     }
//! }
//! ```
//!
//! From the declaration the SDK derives [`Udf::describe`](crate::Udf::describe),
//! [`Udf::result_buffers`](crate::Udf::result_buffers), the input dtype of
//! [`Udf::plan`](crate::Udf::plan) and [`Udf::merge`](crate::Udf::merge); a buffer merged
//! with `Min` or `Max` starts at that merge's identity (`+inf` / `-inf`, the dtype's
//! extremes for integers) on the workers and, through `main_preprocess`, on the main side.

use crate::bindings::udf::plugin::types::{
    BufferDecl, BufferKind, BufferUse, DatasetMeta, Description, Dtype, Method, ParamSpec, TileDepth, TileSize,
};
use crate::buffers::Buffers;
use crate::element::result_type;
use crate::error::{Result, UdfError};
use crate::ops::{Merge, Scalar, with_scalar_type};
use crate::params::Params;

/// The dtype of a declared buffer, possibly following the run's dtypes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BufferDType {
    /// Always this dtype (`self.buffer(dtype="float32")`).
    Is(Dtype),
    /// The run's input dtype (`dtype=self.meta.input_dtype`).
    Input,
    /// NumPy's `result_type` of the input dtype and this one
    /// (`dtype=np.result_type(self.meta.input_dtype, np.float32)`).
    AtLeast(Dtype),
    /// The dataset's native dtype (`dtype=self.meta.dataset_dtype`).
    Dataset,
}

impl From<Dtype> for BufferDType {
    fn from(dtype: Dtype) -> Self {
        BufferDType::Is(dtype)
    }
}

impl BufferDType {
    /// The dtype for a run with this dataset meta.
    pub fn resolve(self, dataset: &DatasetMeta) -> Dtype {
        match self {
            BufferDType::Is(dtype) => dtype,
            BufferDType::Input => dataset.input_dtype,
            BufferDType::AtLeast(dtype) => result_type(dataset.input_dtype, dtype),
            BufferDType::Dataset => dataset.dataset_dtype,
        }
    }
}

/// Extra shape computed from the params and the dataset meta.
pub type ExtraShapeFn = fn(&Params, &DatasetMeta) -> Result<Vec<u64>>;

#[derive(Debug, Clone)]
enum ExtraShape {
    Fixed(Vec<u64>),
    Computed(ExtraShapeFn),
}

/// One declared buffer (see [`Declaration::nav`]).
#[derive(Debug, Clone)]
struct BufferSpec {
    name: String,
    kind: BufferKind,
    dtype: BufferDType,
    extra: ExtraShape,
    usage: BufferUse,
    merge: Option<Merge>,
}

/// Everything a plugin declares, in one place: name, summary, version, parameters,
/// method, preferred input dtype, tiling and result buffers with their merges. Return it
/// from [`Udf::declare`](crate::Udf::declare); see the [module docs](self).
///
/// Buffer modifiers ([`extra_shape`](Self::extra_shape), [`private`](Self::private),
/// [`result_only`](Self::result_only), [`merge`](Self::merge)) apply to the buffer declared
/// last.
#[derive(Debug, Clone)]
pub struct Declaration {
    description: Description,
    buffers: Vec<BufferSpec>,
    declared: bool,
}

impl Declaration {
    /// A plugin named `name`: the tile method, float32 input, no parameters, no buffers.
    /// Its version is the plugin crate's (`CARGO_PKG_VERSION`) unless
    /// [`version`](Self::version) sets one.
    pub fn new(name: &str, summary: &str) -> Self {
        Declaration { description: Description::new(name, "", summary), buffers: Vec::new(), declared: true }
    }

    /// What [`Udf::declare`](crate::Udf::declare) returns when not implemented.
    pub(crate) fn undeclared() -> Self {
        Declaration { declared: false, ..Declaration::new("", "") }
    }

    /// Whether this comes from the plugin (not the default of `Udf::declare`).
    pub(crate) fn is_declared(&self) -> bool {
        self.declared
    }

    /// The plugin's own version.
    pub fn version(mut self, version: &str) -> Self {
        self.description.version = version.to_owned();
        self
    }

    /// Declare a parameter: `.param(ParamSpec::float("r", "radius in pixels").default(2.0))`.
    pub fn param(mut self, spec: ParamSpec) -> Self {
        self.description.params.push(spec);
        self
    }

    /// The processing method (`process_tile` by default; `Method::Frame` for
    /// `process_frame`, `Method::Partition` for `process_partition`).
    pub fn method(self, method: Method) -> Self {
        self.methods(&[method])
    }

    /// Several implemented methods, in order of preference.
    pub fn methods(mut self, methods: &[Method]) -> Self {
        self.description.methods = methods.to_vec();
        self
    }

    /// Prefer this input dtype (float32 unless changed; LiberTEM's
    /// `get_preferred_input_dtype`).
    pub fn input_dtype(mut self, dtype: Dtype) -> Self {
        self.description = self.description.input_dtype(dtype);
        self
    }

    /// Take the dataset's native dtype (LiberTEM's `USE_NATIVE_DTYPE`).
    pub fn native_dtype(mut self) -> Self {
        self.description = self.description.native_dtype();
        self
    }

    /// Tiling preferences of the tile method.
    pub fn tiling(mut self, depth: TileDepth, total_size: TileSize) -> Self {
        self.description = self.description.tiling(depth, total_size);
        self
    }

    /// The plugin implements [`Udf::merge`](crate::Udf::merge) itself (implied by any
    /// buffer with a [`merge`](Self::merge) rule).
    pub fn custom_merge(mut self) -> Self {
        self.description.custom_merge = true;
        self
    }

    /// The plugin implements [`Udf::get_results`](crate::Udf::get_results) (implied by a
    /// [`result_only`](Self::result_only) buffer).
    pub fn custom_results(mut self) -> Self {
        self.description.custom_results = true;
        self
    }

    /// Run [`Udf::preprocess`](crate::Udf::preprocess) on the main side too (implied by
    /// a buffer merged with `Min` or `Max`).
    pub fn main_preprocess(mut self) -> Self {
        self.description.main_preprocess = true;
        self
    }

    fn buffer(mut self, name: &str, kind: BufferKind, dtype: BufferDType) -> Self {
        self.buffers.push(BufferSpec {
            name: name.to_owned(),
            kind,
            dtype,
            extra: ExtraShape::Fixed(Vec::new()),
            usage: BufferUse::Normal,
            merge: None,
        });
        self
    }

    /// A buffer with one entry per frame (`kind="nav"`): `.nav("intensity", DType::Float32)`
    /// or `.nav("intensity", BufferDType::Input)`. Nav buffers without a merge rule are
    /// merged by the host (or copied by the SDK's merge).
    pub fn nav(self, name: &str, dtype: impl Into<BufferDType>) -> Self {
        self.buffer(name, BufferKind::Nav, dtype.into())
    }

    /// A buffer with one entry per signal pixel (`kind="sig"`); give it a
    /// [`merge`](Self::merge) rule.
    pub fn sig(self, name: &str, dtype: impl Into<BufferDType>) -> Self {
        self.buffer(name, BufferKind::Sig, dtype.into())
    }

    /// A buffer of its own shape (`kind="single"`, the shape set by
    /// [`extra_shape`](Self::extra_shape)); give it a [`merge`](Self::merge) rule.
    pub fn single(self, name: &str, dtype: impl Into<BufferDType>) -> Self {
        self.buffer(name, BufferKind::Single, dtype.into())
    }

    fn last(&mut self) -> &mut BufferSpec {
        self.buffers.last_mut().expect("declare a buffer (.nav, .sig, .single) before its modifiers")
    }

    /// Axes appended to the last buffer's shape (`extra_shape=(3, 2)`).
    pub fn extra_shape(mut self, extra: &[u64]) -> Self {
        self.last().extra = ExtraShape::Fixed(extra.to_vec());
        self
    }

    /// Axes appended to the last buffer's shape, computed per run:
    /// `.extra_shape_with(|_, ds| Ok(vec![ds.nav_shape.len() as u64]))`.
    pub fn extra_shape_with(mut self, extra: ExtraShapeFn) -> Self {
        self.last().extra = ExtraShape::Computed(extra);
        self
    }

    /// The last buffer is intermediate only (`use="private"`).
    pub fn private(mut self) -> Self {
        self.last().usage = BufferUse::Private;
        self
    }

    /// The last buffer is produced by `get_results` only (`use="result_only"`).
    pub fn result_only(mut self) -> Self {
        self.last().usage = BufferUse::ResultOnly;
        self
    }

    /// How the last buffer merges: `.merge(Merge::Add)` is LiberTEM's
    /// `dest.x[:] += src.x`. With `Min` / `Max` it starts at that rule's identity.
    pub fn merge(mut self, rule: Merge) -> Self {
        self.last().merge = Some(rule);
        self
    }

    /// The description `udf-host inspect` shows.
    pub fn description(&self) -> Description {
        let mut d = self.description.clone();
        d.custom_merge |= self.buffers.iter().any(|b| b.merge.is_some());
        d.custom_results |= self.buffers.iter().any(|b| b.usage == BufferUse::ResultOnly);
        d.main_preprocess |= self.buffers.iter().any(|b| matches!(b.merge, Some(Merge::Min | Merge::Max)));
        d
    }

    /// The buffer declarations for a run.
    ///
    /// # Errors
    /// What an extra-shape function returns.
    pub fn buffers(&self, params: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        self.buffers
            .iter()
            .map(|b| {
                Ok(BufferDecl {
                    name: b.name.clone(),
                    kind: b.kind,
                    dtype: b.dtype.resolve(dataset),
                    extra_shape: match &b.extra {
                        ExtraShape::Fixed(extra) => extra.clone(),
                        ExtraShape::Computed(f) => f(params, dataset)?,
                    },
                    usage: b.usage,
                })
            })
            .collect()
    }

    /// Start buffers merged with `Min` / `Max` at that rule's identity.
    pub(crate) fn initialise(&self, buffers: &mut Buffers) -> Result<()> {
        for b in self.buffers.iter().filter(|b| b.usage != BufferUse::ResultOnly) {
            let Some(rule @ (Merge::Min | Merge::Max)) = b.merge else { continue };
            let dtype = buffers.dtype(&b.name)?;
            with_scalar_type!(dtype, D => {
                let identity = if rule == Merge::Min { D::HIGHEST } else { D::LOWEST };
                buffers.whole_mut::<D>(&b.name)?.fill(identity);
            });
        }
        Ok(())
    }

    /// The merge by the declared rules: every buffer of `src` into `dest`; nav buffers
    /// without a rule are copied (their views cover only the partition).
    pub(crate) fn merge_buffers(&self, dest: &mut Buffers, src: &Buffers) -> Result<()> {
        let names: Vec<String> = src.names().map(str::to_owned).collect();
        for name in names {
            let spec = self
                .buffers
                .iter()
                .find(|b| b.name == name)
                .ok_or_else(|| UdfError::internal(format!("buffer '{name}' is not declared")))?;
            let rule = match (spec.merge, spec.kind) {
                (Some(rule), _) => rule,
                (None, BufferKind::Nav) => Merge::Assign,
                (None, kind) => {
                    return Err(UdfError::internal(format!(
                        "buffer '{name}' ({}) has no merge rule: declare one with .merge(Merge::Add) (or Min, Max, \
                         Assign), or implement Udf::merge",
                        match kind {
                            BufferKind::Sig => "kind sig",
                            _ => "kind single",
                        }
                    )));
                }
            };
            dest.merge_from(src, &name, rule)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::udf::plugin::types::DeviceClass;

    fn meta(input: Dtype) -> DatasetMeta {
        DatasetMeta {
            nav_shape: vec![3, 4],
            sig_shape: vec![5, 6],
            dataset_dtype: Dtype::Uint16,
            input_dtype: input,
            roi_count: Some(7),
            device_class: DeviceClass::Cpu,
            threads_per_worker: 1,
        }
    }

    #[test]
    fn a_declaration_implies_merge_results_and_main_preprocess() {
        let d = Declaration::new("avg", "average")
            .method(Method::Frame)
            .param(ParamSpec::float("r", "radius").default(2.0))
            .sig("sum", Dtype::Float32)
            .merge(Merge::Add)
            .single("n", Dtype::Uint64)
            .merge(Merge::Add)
            .sig("average", Dtype::Float32)
            .result_only();
        let description = d.description();
        assert_eq!(description.name, "avg");
        assert_eq!(description.version, "", "filled in from the crate by export_udf!");
        assert_eq!(description.methods, vec![Method::Frame]);
        assert_eq!(description.params.len(), 1);
        assert!(description.custom_merge && description.custom_results && !description.main_preprocess);
        let max = Declaration::new("max", "").sig("m", BufferDType::Input).merge(Merge::Max).description();
        assert!(max.main_preprocess && max.custom_merge && !max.custom_results);
        let plain = Declaration::new("sumsig", "").nav("i", BufferDType::Input).description();
        assert!(!plain.custom_merge && !plain.custom_results && !plain.main_preprocess);
    }

    #[test]
    fn buffer_dtypes_and_extra_shapes_follow_the_run() {
        let d = Declaration::new("x", "")
            .nav("input", BufferDType::Input)
            .nav("at_least", BufferDType::AtLeast(Dtype::Float32))
            .extra_shape(&[3, 2])
            .single("native", BufferDType::Dataset)
            .extra_shape_with(|_, ds| Ok(vec![ds.frames()]))
            .sig("fixed", Dtype::Int64)
            .private();
        let decls = d.buffers(&Params::default(), &meta(Dtype::Int32)).unwrap();
        assert_eq!(decls[0].dtype, Dtype::Int32);
        assert_eq!(decls[1].dtype, Dtype::Float64, "result_type(int32, float32)");
        assert_eq!(decls[1].extra_shape, vec![3, 2]);
        assert_eq!(decls[2].dtype, Dtype::Uint16);
        assert_eq!(decls[2].extra_shape, vec![7], "the ROI's frames");
        assert_eq!((decls[3].dtype, decls[3].usage), (Dtype::Int64, BufferUse::Private));
        let decls = d.buffers(&Params::default(), &meta(Dtype::Uint16)).unwrap();
        assert_eq!(decls[1].dtype, Dtype::Float32, "result_type(uint16, float32)");
    }

    #[test]
    fn merging_by_rule_adds_takes_extremes_and_copies_nav_buffers() {
        let d = Declaration::new("x", "")
            .sig("sum", Dtype::Float64)
            .merge(Merge::Add)
            .sig("max", Dtype::Int16)
            .merge(Merge::Max)
            .nav("per_frame", Dtype::Float32);
        let decls = d.buffers(&Params::default(), &meta(Dtype::Float32)).unwrap();
        let mut dest = Buffers::allocate(&decls, 2, &[3]).unwrap();
        d.initialise(&mut dest).unwrap();
        assert!(dest.whole::<i16>("max").unwrap().iter().all(|&v| v == i16::MIN));
        let mut src = Buffers::allocate(&decls, 2, &[3]).unwrap();
        src.assign("sum", &[1.0, 2.0, 3.0]).unwrap();
        src.assign("max", &[-5i16, 0, 9]).unwrap();
        src.assign("per_frame", &[4.0f32, 5.0]).unwrap();
        d.merge_buffers(&mut dest, &src).unwrap();
        d.merge_buffers(&mut dest, &src).unwrap();
        assert_eq!(dest.whole::<f64>("sum").unwrap().as_slice().unwrap(), &[2.0, 4.0, 6.0]);
        assert_eq!(dest.whole::<i16>("max").unwrap().as_slice().unwrap(), &[-5, 0, 9]);
        assert_eq!(dest.whole::<f32>("per_frame").unwrap().as_slice().unwrap(), &[4.0, 5.0]);
        let unruly = Declaration::new("x", "").single("s", Dtype::Float32);
        let decls = unruly.buffers(&Params::default(), &meta(Dtype::Float32)).unwrap();
        let mut dest = Buffers::allocate(&decls, 1, &[3]).unwrap();
        let src = dest.clone();
        let message = unruly.merge_buffers(&mut dest, &src).unwrap_err().message;
        assert!(message.contains("'s'") && message.contains("no merge rule"), "{message}");
    }
}
