//! Probe: a hostile plugin written against the raw bindings. Param `attack` picks what it
//! does wrong:
//!
//! - `none`: behaves (nav buffer `x`, float32, one value per frame)
//! - `huge-export`: exports 40 Mi floats (160 MiB) for `x`
//! - `wrong-shape`, `wrong-dtype`, `undeclared`, `missing`: malformed exports
//! - `huge-error`: returns an error with a 64 MiB message from `process`
//! - `huge-decl`: declares a buffer with an absurd extra shape
//! - `spam`: logs 100 000 lines of 10 KiB each, then behaves
//! - `recurse`: overflows the stack in `process`

wit_bindgen::generate!({ path: "../../../wit", world: "udf-plugin" });

use exports::udf::plugin::udf::Guest;
use std::cell::RefCell;
use udf::plugin::host::{LogLevel, log};
use udf::plugin::types::*;

thread_local! {
    static STATE: RefCell<(String, u64)> = const { RefCell::new((String::new(), 0)) };
}

fn attack(params: &[Param]) -> String {
    params
        .iter()
        .find_map(|p| match (&*p.name, &p.value) {
            ("attack", ParamValue::Text(t)) => Some(t.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

fn recurse(depth: u64) -> u64 {
    if depth == u64::MAX {
        return 0;
    }
    let local = [depth; 64];
    std::hint::black_box(&local);
    recurse(depth + 1) + local[0]
}

struct Hostile;

impl Guest for Hostile {
    fn describe() -> Description {
        Description {
            name: "hostile".into(),
            version: "0.1.0".into(),
            summary: "Breaks the contract on purpose".into(),
            params: vec![ParamSpec {
                name: "attack".into(),
                ty: ParamType::Text,
                doc: "what to do wrong".into(),
                default: Some(ParamValue::Text("none".into())),
                nav_aux: false,
            }],
            methods: vec![Method::Tile],
            input_dtype: DtypePreference::Prefer(Dtype::Float32),
            tiling: TilingPreferences { depth: TileDepth::Default, total_size: TileSize::BestFit },
            custom_merge: false,
            custom_results: false,
            main_preprocess: false,
            data_access: DataAccess::Typed,
        }
    }

    fn plan(_: Vec<Param>, _: DatasetMeta) -> Result<RunPlan, UdfError> {
        Ok(RunPlan {
            method: Method::Tile,
            input_dtype: DtypePreference::Prefer(Dtype::Float32),
            tiling: TilingPreferences { depth: TileDepth::Default, total_size: TileSize::BestFit },
        })
    }

    fn result_buffers(params: Vec<Param>, _: DatasetMeta) -> Result<Vec<BufferDecl>, UdfError> {
        let extra = if attack(&params) == "huge-decl" { vec![1 << 40, 1 << 40] } else { Vec::new() };
        Ok(vec![BufferDecl {
            name: "x".into(),
            kind: BufferKind::Nav,
            dtype: Dtype::Float32,
            extra_shape: extra,
            usage: BufferUse::Normal,
        }])
    }

    fn init(ctx: InitContext) -> Result<(), UdfError> {
        let frames = ctx.partition.map_or(0, |p| p.frames);
        STATE.with(|s| *s.borrow_mut() = (attack(&ctx.params), frames));
        Ok(())
    }

    fn preprocess() -> Result<(), UdfError> {
        Ok(())
    }

    fn process(_: Tile) -> Result<(), UdfError> {
        let attack = STATE.with(|s| s.borrow().0.clone());
        match attack.as_str() {
            "huge-error" => Err(UdfError { kind: ErrorKind::Internal, message: "e".repeat(64 << 20) }),
            "spam" => {
                let line = "s".repeat(10 << 10);
                for _ in 0..100_000 {
                    log(LogLevel::Info, &line);
                }
                Ok(())
            }
            "recurse" => {
                std::hint::black_box(recurse(0));
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn postprocess() -> Result<(), UdfError> {
        Ok(())
    }

    fn export_buffers() -> Result<Vec<NamedArray>, UdfError> {
        let (attack, frames) = STATE.with(|s| s.borrow().clone());
        let array = |name: &str, dtype, shape: Vec<u64>, data| NamedArray {
            name: name.into(),
            data: Ndarray { dtype, shape, data },
        };
        let ok = array("x", Dtype::Float32, vec![frames], ArrayData::Float32(vec![1.0; frames as usize]));
        Ok(match attack.as_str() {
            "huge-export" => vec![array("x", Dtype::Float32, vec![frames], ArrayData::Float32(vec![0.0; 40 << 20]))],
            "wrong-shape" => {
                vec![array("x", Dtype::Float32, vec![frames + 1], ArrayData::Float32(vec![0.0; frames as usize + 1]))]
            }
            "wrong-dtype" => {
                vec![array("x", Dtype::Float64, vec![frames], ArrayData::Float64(vec![0.0; frames as usize]))]
            }
            "undeclared" => vec![ok, array("y", Dtype::Float32, vec![1], ArrayData::Float32(vec![0.0]))],
            "missing" => Vec::new(),
            _ => vec![ok],
        })
    }

    fn merge(_: MergeContext, dest: Vec<NamedArray>, _: Vec<NamedArray>) -> Result<Vec<NamedArray>, UdfError> {
        Ok(dest)
    }

    fn get_results(_: ResultsContext, _: Vec<NamedArray>) -> Result<Vec<ResultEntry>, UdfError> {
        Err(UdfError { kind: ErrorKind::Internal, message: "get_results was not declared".into() })
    }
}

export!(Hostile);
