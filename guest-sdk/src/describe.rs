//! Builders for what a plugin declares: its description, parameters, plan and buffers.

use crate::bindings::udf::plugin::types::{
    BufferDecl, BufferKind, BufferUse, DataAccess, Description, Dtype, DtypePreference, Method, ParamSpec, ParamType,
    ParamValue, RunPlan, TileDepth, TileSize, TilingPreferences,
};

impl Description {
    /// A description with no parameters, the tile method, float32 input, default tiling
    /// and no custom merge or results.
    pub fn new(name: &str, version: &str, summary: &str) -> Self {
        Description {
            name: name.to_owned(),
            version: version.to_owned(),
            summary: summary.to_owned(),
            params: Vec::new(),
            methods: vec![Method::Tile],
            input_dtype: DtypePreference::Prefer(Dtype::Float32),
            tiling: TilingPreferences { depth: TileDepth::Default, total_size: TileSize::BestFit },
            custom_merge: false,
            custom_results: false,
            main_preprocess: false,
            data_access: DataAccess::Typed,
        }
    }

    /// Replace the implemented methods (`process_tile`, `process_frame`,
    /// `process_partition`), in order of preference.
    pub fn methods(mut self, methods: &[Method]) -> Self {
        self.methods = methods.to_vec();
        self
    }

    /// Declare a parameter.
    pub fn param(mut self, spec: ParamSpec) -> Self {
        self.params.push(spec);
        self
    }

    /// Prefer this input dtype (`Dtype::Float32` unless changed).
    pub fn input_dtype(mut self, dtype: Dtype) -> Self {
        self.input_dtype = DtypePreference::Prefer(dtype);
        self
    }

    /// Take the dataset's native dtype (LiberTEM's `USE_NATIVE_DTYPE`).
    pub fn native_dtype(mut self) -> Self {
        self.input_dtype = DtypePreference::Native;
        self
    }

    /// Tiling preferences for the tile method.
    pub fn tiling(mut self, depth: TileDepth, total_size: TileSize) -> Self {
        self.tiling = TilingPreferences { depth, total_size };
        self
    }

    /// The plugin implements [`Udf::merge`](crate::Udf::merge).
    pub fn custom_merge(mut self) -> Self {
        self.custom_merge = true;
        self
    }

    /// The plugin implements [`Udf::get_results`](crate::Udf::get_results).
    pub fn custom_results(mut self) -> Self {
        self.custom_results = true;
        self
    }

    /// Run [`Udf::preprocess`](crate::Udf::preprocess) on the main side too, to initialise
    /// the merged buffers.
    pub fn main_preprocess(mut self) -> Self {
        self.main_preprocess = true;
        self
    }
}

impl ParamSpec {
    fn of(name: &str, ty: ParamType, doc: &str) -> Self {
        ParamSpec { name: name.to_owned(), ty, doc: doc.to_owned(), default: None, nav_aux: false }
    }

    /// A boolean parameter.
    pub fn boolean(name: &str, doc: &str) -> Self {
        Self::of(name, ParamType::Boolean, doc)
    }

    /// An integer parameter.
    pub fn int(name: &str, doc: &str) -> Self {
        Self::of(name, ParamType::Int, doc)
    }

    /// A floating-point parameter (integers given by the user are accepted).
    pub fn float(name: &str, doc: &str) -> Self {
        Self::of(name, ParamType::Float, doc)
    }

    /// A text parameter.
    pub fn text(name: &str, doc: &str) -> Self {
        Self::of(name, ParamType::Text, doc)
    }

    /// An n-d array parameter (`--param name=@file.npy` or `--param name=1,2,3`).
    pub fn array(name: &str, doc: &str) -> Self {
        Self::of(name, ParamType::Array, doc)
    }

    /// Per-frame auxiliary data: an array whose leading axes are the nav shape, sliced by
    /// the host to the current partition, tile and frame.
    pub fn nav_aux(name: &str, doc: &str) -> Self {
        ParamSpec { nav_aux: true, ..Self::of(name, ParamType::Array, doc) }
    }

    /// Give the parameter a default value (otherwise it is required).
    pub fn default(mut self, value: impl Into<ParamValue>) -> Self {
        self.default = Some(value.into());
        self
    }

    /// Give an array parameter a default: `values` in C order with `shape`.
    pub fn default_array<T: crate::Element>(mut self, shape: &[u64], values: Vec<T>) -> Self {
        self.default = Some(ParamValue::Array(crate::bindings::udf::plugin::types::Ndarray {
            dtype: T::DTYPE,
            shape: shape.to_vec(),
            data: T::into_data(values),
        }));
        self
    }
}

impl From<bool> for ParamValue {
    fn from(value: bool) -> Self {
        ParamValue::Boolean(value)
    }
}

impl From<i64> for ParamValue {
    fn from(value: i64) -> Self {
        ParamValue::Int(value)
    }
}

impl From<f64> for ParamValue {
    fn from(value: f64) -> Self {
        ParamValue::Float(value)
    }
}

impl From<&str> for ParamValue {
    fn from(value: &str) -> Self {
        ParamValue::Text(value.to_owned())
    }
}

impl RunPlan {
    /// The plan the host would pick from a description alone: the first implemented
    /// method in the order tile > frame > partition, the described dtype and tiling.
    pub fn from_description(description: &Description) -> Self {
        let method = [Method::Tile, Method::Frame, Method::Partition]
            .into_iter()
            .find(|m| description.methods.contains(m))
            .unwrap_or(Method::Tile);
        RunPlan { method, input_dtype: description.input_dtype, tiling: description.tiling }
    }
}

impl BufferDecl {
    fn of(name: &str, kind: BufferKind, dtype: Dtype) -> Self {
        BufferDecl { name: name.to_owned(), kind, dtype, extra_shape: Vec::new(), usage: BufferUse::Normal }
    }

    /// One entry per frame (LiberTEM `kind='nav'`).
    pub fn nav(name: &str, dtype: Dtype) -> Self {
        Self::of(name, BufferKind::Nav, dtype)
    }

    /// One entry per signal pixel (LiberTEM `kind='sig'`).
    pub fn sig(name: &str, dtype: Dtype) -> Self {
        Self::of(name, BufferKind::Sig, dtype)
    }

    /// A single value or array (LiberTEM `kind='single'`).
    pub fn single(name: &str, dtype: Dtype) -> Self {
        Self::of(name, BufferKind::Single, dtype)
    }

    /// Append axes to the buffer's shape.
    pub fn extra_shape(mut self, extra: &[u64]) -> Self {
        self.extra_shape = extra.to_vec();
        self
    }

    /// Intermediate only: never part of the results.
    pub fn private(mut self) -> Self {
        self.usage = BufferUse::Private;
        self
    }

    /// Not allocated during processing; [`Udf::get_results`](crate::Udf::get_results)
    /// must produce it.
    pub fn result_only(mut self) -> Self {
        self.usage = BufferUse::ResultOnly;
        self
    }
}
