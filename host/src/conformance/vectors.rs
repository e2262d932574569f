//! Language-neutral test vectors: per case a run spec (`case.json`), a dataset and the
//! expected result arrays as `.npy`, computed independently (`tests/vectors/generate.py`
//! uses NumPy). Any host can run them; this one runs every case whose plugin is given,
//! in every partition count and tile shape the case lists. The format is documented in
//! `tests/vectors/README.md`.

use super::compare::compare;
use super::report::{Check, Evidence, Group};
use super::{ConformanceError, Tolerance};
use crate::array::NdArray;
use crate::dataset::{self, OpenOptions};
use crate::exec::{Run, RunOptions, UdfSpec};
use crate::roi::Roi;
use crate::udf::{ParamSpec, ParamType, ParamValue, Params, Udf};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The format tag every `case.json` carries.
pub const FORMAT: &str = "udf-conformance-vector/1";

/// A parsed `case.json`.
#[derive(Debug, Clone)]
pub struct Case {
    /// The case name (its directory name).
    pub name: String,
    pub description: String,
    /// The plugin's name (as in its description).
    pub plugin: String,
    /// Raw JSON params, converted against the plugin's specs when run.
    pub params: serde_json::Map<String, Value>,
    pub dataset: PathBuf,
    pub nav_shape: Option<Vec<usize>>,
    pub sig_shape: Option<Vec<usize>>,
    pub roi: Option<PathBuf>,
    /// Partition counts to run (`None` = the host's default).
    pub partitions: Vec<Option<usize>>,
    /// Tile shapes to force (`None` = negotiated).
    pub tile_shapes: Vec<Option<Vec<usize>>>,
    pub rtol: f64,
    pub atol: f64,
    pub input_dtype: Option<String>,
    /// Result name → expected `.npy` (LiberTEM's `.data` layout).
    pub expected: Vec<(String, PathBuf)>,
}

fn bad(path: &Path, message: impl std::fmt::Display) -> ConformanceError {
    ConformanceError::Vectors(format!("{}: {message}", path.display()))
}

fn shape(value: Option<&Value>, path: &Path, what: &str) -> Result<Option<Vec<usize>>, ConformanceError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_u64().map(|n| n as usize).ok_or_else(|| bad(path, format!("{what}: {v} is not an extent"))))
            .collect::<Result<Vec<_>, _>>()
            .map(Some),
        Some(other) => Err(bad(path, format!("{what} must be a list of extents or null, got {other}"))),
    }
}

impl Case {
    /// Parse `dir/case.json`.
    ///
    /// # Errors
    /// Unreadable or malformed JSON, a wrong format tag, missing fields.
    pub fn load(dir: &Path) -> Result<Case, ConformanceError> {
        let path = dir.join("case.json");
        let text = std::fs::read_to_string(&path).map_err(|e| bad(&path, e))?;
        let json: Value = serde_json::from_str(&text).map_err(|e| bad(&path, e))?;
        if json.get("format").and_then(Value::as_str) != Some(FORMAT) {
            return Err(bad(&path, format!("\"format\" must be \"{FORMAT}\"")));
        }
        let text_field = |key: &str| json.get(key).and_then(Value::as_str).map(str::to_owned);
        let plugin = text_field("plugin").ok_or_else(|| bad(&path, "\"plugin\" (a name) is missing"))?;
        let data = json.get("dataset").ok_or_else(|| bad(&path, "\"dataset\" is missing"))?;
        let dataset = data
            .get("path")
            .and_then(Value::as_str)
            .map(|p| dir.join(p))
            .ok_or_else(|| bad(&path, "\"dataset.path\" is missing"))?;
        let partitions = match json.get("partitions") {
            None | Some(Value::Null) => vec![None],
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::Null => Ok(None),
                    v => v
                        .as_u64()
                        .filter(|&n| n > 0)
                        .map(|n| Some(n as usize))
                        .ok_or_else(|| bad(&path, format!("partitions: {v} is not a positive count"))),
                })
                .collect::<Result<Vec<_>, _>>()?,
            Some(other) => return Err(bad(&path, format!("\"partitions\" must be a list, got {other}"))),
        };
        let tile_shapes = match json.get("tile_shapes") {
            None | Some(Value::Null) => vec![None],
            Some(Value::Array(items)) => {
                items.iter().map(|v| shape(Some(v), &path, "tile_shapes")).collect::<Result<Vec<_>, _>>()?
            }
            Some(other) => return Err(bad(&path, format!("\"tile_shapes\" must be a list, got {other}"))),
        };
        let tolerance = json.get("tolerance");
        let number =
            |key: &str, default: f64| tolerance.and_then(|t| t.get(key)).and_then(Value::as_f64).unwrap_or(default);
        let expected = match json.get("expected") {
            Some(Value::Object(map)) => map
                .iter()
                .map(|(k, v)| {
                    v.as_str()
                        .map(|p| (k.clone(), dir.join(p)))
                        .ok_or_else(|| bad(&path, format!("expected.{k} must be a file name")))
                })
                .collect::<Result<Vec<_>, _>>()?,
            _ => return Err(bad(&path, "\"expected\" must map result names to .npy files")),
        };
        Ok(Case {
            name: dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            description: text_field("description").unwrap_or_default(),
            plugin,
            params: json.get("params").and_then(Value::as_object).cloned().unwrap_or_default(),
            dataset,
            nav_shape: shape(data.get("nav_shape"), &path, "dataset.nav_shape")?,
            sig_shape: shape(data.get("sig_shape"), &path, "dataset.sig_shape")?,
            roi: json.get("roi").and_then(Value::as_str).map(|p| dir.join(p)),
            partitions,
            tile_shapes,
            rtol: number("rtol", 1e-5),
            atol: number("atol", 1e-8),
            input_dtype: text_field("input_dtype"),
            expected,
        })
    }
}

/// Every case directory under `dir` (those holding a `case.json`), sorted by name.
///
/// # Errors
/// The directory cannot be read.
pub fn cases(dir: &Path) -> Result<Vec<PathBuf>, ConformanceError> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        if d.join("case.json").is_file() {
            out.push(d.clone());
        }
        let entries = std::fs::read_dir(&d).map_err(|e| bad(&d, e))?;
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(entry.path());
            }
        }
    }
    out.sort();
    if out.is_empty() {
        return Err(bad(dir, "no case.json found below this directory"));
    }
    Ok(out)
}

/// A JSON param value as the spec's type.
fn param(spec: &ParamSpec, value: &Value, base: &Path) -> Result<ParamValue, String> {
    let wrong = || format!("parameter '{}' expects {}, the case gives {value}", spec.name, spec.ty.name());
    match spec.ty {
        ParamType::Bool => value.as_bool().map(ParamValue::Bool).ok_or_else(wrong),
        ParamType::Int => value.as_i64().map(ParamValue::Int).ok_or_else(wrong),
        ParamType::Float => value.as_f64().map(ParamValue::Float).ok_or_else(wrong),
        ParamType::Text => value.as_str().map(|s| ParamValue::Text(s.to_owned())).ok_or_else(wrong),
        ParamType::Array => {
            if let Some(file) = value.get("npy").and_then(Value::as_str) {
                return crate::npy::read_array(&base.join(file)).map(|a| ParamValue::Array(Arc::new(a)));
            }
            let items = value.as_array().ok_or_else(wrong)?;
            let values = items.iter().map(Value::as_f64).collect::<Option<Vec<f64>>>().ok_or_else(wrong)?;
            NdArray::from_vec(&[values.len()], values)
                .map(|a| ParamValue::Array(Arc::new(a)))
                .map_err(|e| e.to_string())
        }
    }
}

fn variant_name(partitions: Option<usize>, tile: &Option<Vec<usize>>) -> String {
    let p = partitions.map_or("default partitions".to_owned(), |p| format!("{p} partitions"));
    let t = tile.as_ref().map_or("negotiated tiles".to_owned(), |t| {
        format!("tile {}", t.iter().map(usize::to_string).collect::<Vec<_>>().join("x"))
    });
    format!("{p}, {t}")
}

/// What a case runs on, read and converted for one plugin.
struct Setup {
    data: Arc<dyn dataset::Dataset>,
    params: Params,
    roi: Option<Roi>,
    expected: Vec<(String, NdArray)>,
}

/// Open the case's dataset, convert its params for `udf`, read its ROI and expected arrays.
fn setup(case: &Case, dir: &Path, udf: &Arc<dyn Udf>) -> Result<Setup, String> {
    let options =
        OpenOptions { nav_shape: case.nav_shape.clone(), sig_shape: case.sig_shape.clone(), ..Default::default() };
    let data = dataset::open(&case.dataset, &options).map_err(|e| e.to_string())?;
    let mut params = Params::default();
    for (name, value) in &case.params {
        let spec = udf
            .description()
            .params
            .iter()
            .find(|s| s.name == *name)
            .ok_or_else(|| format!("the plugin has no parameter '{name}'"))?;
        params.set(name, param(spec, value, dir)?);
    }
    let roi = match &case.roi {
        Some(path) => {
            let array = crate::npy::read_array(path)?;
            Some(Roi::from_array(&array, &data.shape().nav)?)
        }
        None => None,
    };
    let expected = case
        .expected
        .iter()
        .map(|(name, path)| crate::npy::read_array(path).map(|a| (name.clone(), a)))
        .collect::<Result<Vec<_>, String>>()?;
    Ok(Setup { data, params, roi, expected })
}

/// Run one case with `udf`.
fn run_case(
    case: &Case,
    dir: &Path,
    udf: &Arc<dyn Udf>,
    threads: usize,
    tolerance: Option<Tolerance>,
) -> Vec<Evidence> {
    let Setup { data, params, roi, expected } = match setup(case, dir, udf) {
        Ok(s) => s,
        Err(e) => return vec![Evidence::fail("setup", e)],
    };
    let mut out = Vec::new();
    for &partitions in &case.partitions {
        for tile in &case.tile_shapes {
            let variant = variant_name(partitions, tile);
            let options = RunOptions {
                roi: roi.clone(),
                partitions,
                threads: Some(threads),
                tile_shape: tile.clone(),
                ..Default::default()
            };
            let spec = UdfSpec { udf: udf.clone(), params: params.clone() };
            let results = match Run::plan(data.clone(), vec![spec], options).and_then(Run::execute) {
                Ok(r) => r,
                Err(e) => {
                    out.push(Evidence::fail(&variant, e.to_string()));
                    continue;
                }
            };
            if let Some(want) = &case.input_dtype
                && results.input_dtype.name() != want
            {
                out.push(Evidence::fail(
                    &variant,
                    format!("input dtype {} instead of {want}", results.input_dtype.name()),
                ));
                continue;
            }
            let mut evidence = None;
            let mut worst: Option<Evidence> = None;
            for (name, want) in &expected {
                let Some(got) = results.udfs[0].buffer(name) else {
                    evidence = Some(Evidence::fail(&variant, format!("no result '{name}'")));
                    break;
                };
                let tol = match tolerance {
                    Some(t) => t.for_dtype(want.dtype()),
                    None => Tolerance::fixed(case.rtol, case.atol).for_dtype(want.dtype()),
                };
                let diff = compare(want, &got.data, tol);
                if !diff.equal {
                    let message = match &diff.note {
                        Some(note) => format!("'{name}': {note}"),
                        None => format!(
                            "'{name}' differs from the expected values in {} of {} elements",
                            diff.mismatches,
                            want.len()
                        ),
                    };
                    evidence = Some(Evidence::fail(&variant, message).buffer(name).diff(&diff));
                    break;
                }
                let e = Evidence::pass(&variant, format!("{} results match", expected.len())).buffer(name).diff(&diff);
                if worst.as_ref().is_none_or(|w| w.max_rel_diff < e.max_rel_diff) {
                    worst = Some(e);
                }
            }
            out.push(evidence.or(worst).unwrap_or_else(|| Evidence::pass(&variant, "ran (no expected results)")));
        }
    }
    out
}

/// Run every case under `dir` whose plugin is among `udfs`; cases for other plugins are
/// reported as not applicable.
///
/// # Errors
/// The directory or a `case.json` cannot be read or is malformed.
pub fn run(
    dir: &Path,
    udfs: &[Arc<dyn Udf>],
    threads: usize,
    tolerance: Option<Tolerance>,
) -> Result<Vec<Check>, ConformanceError> {
    let mut checks = Vec::new();
    for case_dir in cases(dir)? {
        let case = Case::load(&case_dir)?;
        let title = if case.description.is_empty() {
            format!("vector case for '{}'", case.plugin)
        } else {
            case.description.clone()
        };
        match udfs.iter().find(|u| u.description().name == case.plugin) {
            Some(udf) => {
                let evidence = run_case(&case, &case_dir, udf, threads, tolerance);
                checks.push(Check::from_evidence(Group::Vectors, &case.name, &title, evidence));
            }
            None => checks.push(Check::not_applicable(
                Group::Vectors,
                &case.name,
                &title,
                format!("plugin '{}' was not given", case.plugin),
            )),
        }
    }
    Ok(checks)
}
