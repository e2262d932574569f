//! Parameters: parsing command-line values and checking them against a UDF's specs.

use crate::array::NdArray;
use crate::udf::{Param, ParamSpec, ParamType, ParamValue, Params};
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
}
