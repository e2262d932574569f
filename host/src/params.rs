//! Parameters: parsing command-line values, checking them against a UDF's specs, and
//! giving `NAME=VALUE` texts to the UDFs of a run ([`assign`]).

use crate::array::NdArray;
use crate::udf::{Param, ParamSpec, ParamType, ParamValue, Params, Udf};
use std::path::Path;
use std::sync::Arc;

/// Parse a command-line value for `spec`: `true`/`false`, an integer, a float, text,
/// `@file.npy` for arrays, or a comma-separated list of numbers (a 1-D float64 array).
///
/// # Errors
/// A message naming the parameter, the expected type and the value.
pub fn parse_value(spec: &ParamSpec, text: &str) -> Result<ParamValue, String> {
    let bad = |what: &str| format!("parameter '{}' expects {what}, got '{text}'", spec.name);
    match spec.ty {
        ParamType::Bool => match text.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Ok(ParamValue::Bool(true)),
            "false" | "0" | "no" | "off" => Ok(ParamValue::Bool(false)),
            _ => Err(bad("true or false")),
        },
        ParamType::Int => text.trim().parse().map(ParamValue::Int).map_err(|_| bad("an integer")),
        ParamType::Float => parse_float(text).map(ParamValue::Float).ok_or_else(|| bad("a number")),
        ParamType::Text => Ok(ParamValue::Text(text.to_owned())),
        ParamType::Array => parse_array(text)
            .map(|a| ParamValue::Array(Arc::new(a)))
            .map_err(|e| format!("parameter '{}' expects an array (@file.npy or numbers like 1,2,3): {e}", spec.name)),
    }
}

fn parse_float(text: &str) -> Option<f64> {
    match text.trim().to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" => Some(f64::INFINITY),
        "-inf" | "-infinity" => Some(f64::NEG_INFINITY),
        t => t.parse().ok(),
    }
}

fn parse_array(text: &str) -> Result<NdArray, String> {
    if let Some(path) = text.strip_prefix('@') {
        return crate::npy::read_array(Path::new(path));
    }
    let values = text
        .split(',')
        .map(|v| parse_float(v).ok_or_else(|| format!("'{}' is not a number", v.trim())))
        .collect::<Result<Vec<f64>, String>>()?;
    NdArray::from_vec(&[values.len()], values).map_err(|e| e.to_string())
}

/// Check `given` against `specs` and fill in defaults: unknown names, wrong types and
/// missing required parameters are errors; integers are accepted for floats.
///
/// # Errors
/// A message naming the UDF and the parameter, listing what is accepted.
pub fn resolve(udf: &str, specs: &[ParamSpec], given: &Params) -> Result<Params, String> {
    let accepted = || {
        if specs.is_empty() {
            "it takes no parameters".to_owned()
        } else {
            let list: Vec<String> = specs.iter().map(|s| format!("{} ({})", s.name, s.ty.name())).collect();
            format!("it accepts: {}", list.join(", "))
        }
    };
    for p in given.iter() {
        if !specs.iter().any(|s| s.name == p.name) {
            return Err(format!("'{udf}' has no parameter '{}'; {}", p.name, accepted()));
        }
    }
    let mut out = Vec::with_capacity(specs.len());
    for spec in specs {
        let value = match given.get(&spec.name) {
            Some(v) => coerce(udf, spec, v.clone())?,
            None => match &spec.default {
                Some(d) => d.clone(),
                None => {
                    return Err(format!("'{udf}' needs parameter '{}' ({}): {}", spec.name, spec.ty.name(), spec.doc));
                }
            },
        };
        out.push(Param { name: spec.name.clone(), value });
    }
    Ok(Params(out))
}

fn coerce(udf: &str, spec: &ParamSpec, value: ParamValue) -> Result<ParamValue, String> {
    match (spec.ty, value) {
        (ParamType::Float, ParamValue::Int(i)) => Ok(ParamValue::Float(i as f64)),
        (ty, v) if v.param_type() == ty => Ok(v),
        (ty, v) => Err(format!(
            "parameter '{}' of '{udf}' must be {}, got {} ({v})",
            spec.name,
            ty.name(),
            v.param_type().name()
        )),
    }
}

/// `--param` values that cannot be given to the UDFs of a run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AssignError(String);

/// Give parameters written `NAME=VALUE` (as `--param` takes them) to the UDFs of a run:
/// `UDF.NAME=VALUE` gives one UDF its value, named as in the run (`NAME`, `NAME-2`, ...
/// for repeats, as the output directories; see [`unique_names`](crate::udf::rules::unique_names)),
/// or every UDF of that name when none is named so; `NAME=VALUE` gives every UDF that
/// declares `NAME` its value. One [`Params`] per UDF, in order.
///
/// # Errors
/// [`AssignError`] for text that is not `NAME=VALUE`, a value of the wrong type, a UDF
/// that is not in the run, or a parameter no UDF (or not the named one) declares.
pub fn assign(udfs: &[Arc<dyn Udf>], given: &[String]) -> Result<Vec<Params>, AssignError> {
    let fail = |message: String| Err(AssignError(message));
    let run_names = crate::udf::rules::unique_names(udfs.iter().map(|u| u.description().name.as_str()));
    let mut assigned: Vec<Params> = vec![Params::default(); udfs.len()];
    for flag in given {
        let Some((key, value)) = flag.split_once('=') else {
            return fail(format!("--param '{flag}' must be NAME=VALUE (or UDF.NAME=VALUE)"));
        };
        let (target, name) = match key.split_once('.') {
            Some((udf, name)) => (Some(udf), name),
            None => (None, key),
        };
        let by_run_name = target.is_some_and(|t| run_names.iter().any(|n| n == t));
        let mut matched = false;
        for ((udf, params), run_name) in udfs.iter().zip(assigned.iter_mut()).zip(&run_names) {
            let desc = udf.description();
            let named = if by_run_name { run_name } else { &desc.name };
            if target.is_some_and(|t| t != named) {
                continue;
            }
            let Some(spec) = desc.params.iter().find(|s| s.name == name) else {
                if target.is_some() {
                    return fail(format!("'{named}' has no parameter '{name}' (it accepts: {})", param_names(udf)));
                }
                continue;
            };
            let value = parse_value(spec, value).map_err(|e| AssignError(format!("--param {flag}: {e}")))?;
            params.0.push(Param { name: name.to_owned(), value });
            matched = true;
        }
        if !matched {
            return fail(match target {
                Some(t) => {
                    format!("--param {flag}: no plugin named '{t}' in this run (plugins: {})", run_names.join(", "))
                }
                None => {
                    let all: Vec<String> =
                        udfs.iter().map(|u| format!("{}: {}", u.description().name, param_names(u))).collect();
                    format!("no plugin has a parameter '{name}' (parameters: {})", all.join("; "))
                }
            });
        }
    }
    Ok(assigned)
}

/// A UDF's parameter names, comma-separated (`none` when it has none).
fn param_names(udf: &Arc<dyn Udf>) -> String {
    let names: Vec<&str> = udf.description().params.iter().map(|s| s.name.as_str()).collect();
    if names.is_empty() { "none".into() } else { names.join(", ") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, ty: ParamType, default: Option<ParamValue>) -> ParamSpec {
        ParamSpec { name: name.into(), ty, doc: String::new(), default, nav_aux: false }
    }

    #[test]
    fn parses_each_type() {
        assert!(matches!(parse_value(&spec("b", ParamType::Bool, None), "yes"), Ok(ParamValue::Bool(true))));
        assert!(matches!(parse_value(&spec("i", ParamType::Int, None), "-3"), Ok(ParamValue::Int(-3))));
        assert!(
            matches!(parse_value(&spec("f", ParamType::Float, None), "inf"), Ok(ParamValue::Float(f)) if f.is_infinite())
        );
        let ParamValue::Array(a) = parse_value(&spec("a", ParamType::Array, None), "1, 2.5,3").unwrap() else {
            panic!("not an array")
        };
        assert_eq!(a.as_slice::<f64>(), Some(&[1.0, 2.5, 3.0][..]));
        let err = parse_value(&spec("i", ParamType::Int, None), "1.5").unwrap_err();
        assert!(err.contains("'i'") && err.contains("integer"), "{err}");
    }

    #[test]
    fn resolves_defaults_and_rejects_unknown() {
        let specs = [spec("r", ParamType::Float, Some(ParamValue::Float(1.0))), spec("n", ParamType::Int, None)];
        let given = Params(vec![Param { name: "n".into(), value: ParamValue::Int(2) }]);
        let p = resolve("x", &specs, &given).unwrap();
        assert!(matches!(p.get("r"), Some(ParamValue::Float(f)) if *f == 1.0));
        let unknown = Params(vec![Param { name: "q".into(), value: ParamValue::Int(2) }]);
        let err = resolve("x", &specs, &unknown).unwrap_err();
        assert!(err.contains("no parameter 'q'") && err.contains("r (float)"), "{err}");
        let err = resolve("x", &specs, &Params::default()).unwrap_err();
        assert!(err.contains("needs parameter 'n'"), "{err}");
        let wrong = Params(vec![Param { name: "n".into(), value: ParamValue::Text("a".into()) }]);
        assert!(resolve("x", &specs, &wrong).unwrap_err().contains("must be int"));
    }

    #[test]
    fn assigned_values_go_to_the_udfs_named_by_their_run_names() {
        let ring = || crate::builtins::get("ring").unwrap();
        let udfs = vec![ring(), crate::builtins::get("sum").unwrap(), ring()];
        let given: Vec<String> = ["ri=2", "ring-2.ro=9", "sum.dtype=float64"].map(String::from).to_vec();
        let params = assign(&udfs, &given).unwrap();
        let names = |p: &Params| p.iter().map(|p| p.name.clone()).collect::<Vec<String>>();
        // `ri` for both rings, `ro` for the second only, `dtype` for sum only.
        assert_eq!(names(&params[0]), ["ri"]);
        assert_eq!(names(&params[1]), ["dtype"]);
        assert_eq!(names(&params[2]), ["ri", "ro"]);
        assert!(matches!(params[2].get("ro"), Some(ParamValue::Float(f)) if *f == 9.0));
        assert!(matches!(params[1].get("dtype"), Some(ParamValue::Text(t)) if t == "float64"));
    }

    #[test]
    fn assigning_what_no_udf_takes_says_what_they_take() {
        let udfs = vec![crate::builtins::get("sum").unwrap()];
        let error = |flag: &str| assign(&udfs, &[flag.to_owned()]).unwrap_err().to_string();
        assert!(error("dtype").contains("must be NAME=VALUE"));
        assert!(error("bogus=1").contains("no plugin has a parameter 'bogus'"));
        assert!(error("sum.bogus=1").contains("'sum' has no parameter 'bogus'"));
        assert!(error("nope.dtype=float32").contains("no plugin named 'nope'"));
    }
}
