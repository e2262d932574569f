//! Probe: a hostile plugin written against the raw bindings. Param `attack` picks what it
//! does wrong; for the attacks of the lifecycle matrix, param `at` picks the call it does
//! it in: `plan`, `result_buffers`, `init`, `preprocess`, `process`, `postprocess`,
//! `export_buffers`, `merge`, `get_results` (`describe` has no parameters to choose by).
//!
//! Behaving (`none`, or an attack in another call): one nav buffer `x`, float32, one value
//! per frame (1.0), a custom merge that copies the partition's rows, a `get_results` that
//! passes the buffers through.
//!
//! The lifecycle matrix (`at` = the call):
//!
//! - `trap`: panics; `loop`: loops forever; `allocate`: allocates until memory runs out
//! - `sleep`: waits for the clock to move, sleeping an hour at a time
//!   (`std::thread::sleep`); `poll`: the same, polling a monotonic-clock subscription
//!   (`wasi:io/poll`); under the frozen clock both loop until `--timeout`, but must never
//!   block the host on a real timer (which would hold it for an hour)
//! - `resources`: subscribes to timers without dropping them, until the host refuses
//! - `nap`: sleeps one hour once (`std::thread::sleep`), then behaves: timers are due at
//!   once, so the run completes (and the conformance kit flags the sleep)
//! - `oversized`: arrays far larger than declared (data calls), 50 000 declared buffers
//!   (`result_buffers`), else an error with a 64 MiB message
//! - `big`: an 8 MiB array for `x` (data calls; for the total budget's share of what a
//!   call returns), else as `oversized`
//! - `many`: 200 000 tiny arrays (data calls; for the host's memory budget and the count cap, with
//!   `--max-memory 64M`), else as `oversized`
//! - `odd`: float64 arrays of the wrong shape (data calls), an extra shape of 40 axes
//!   (`result_buffers`), an undeclared method (`plan`), else an error message full of
//!   escape codes and a line that fakes the host's
//! - `misnamed`: arrays named `x.valid`, `results.json`, `../x`, with a NUL and 300 bytes
//!   long (data calls), buffers `x` and `x.valid` (`result_buffers`), else as `odd`
//!
//! Attacks of their own (older tests; `at` is ignored):
//!
//! - `huge-export`: exports 40 Mi floats (160 MiB) for `x`
//! - `wrong-shape`, `wrong-dtype`, `undeclared`, `missing`: malformed exports
//! - `huge-error`: returns an error with a 64 MiB message from `process`
//! - `huge-decl`: declares a buffer with an absurd extra shape
//! - `spam`: logs 100 000 lines of 10 KiB each, then behaves
//! - `chatty`: logs 2 000 lines of 4 000 bytes each (8 MB), then behaves
//! - `late-panic`: logs 20 000 lines, then panics in `process` (the panic's message must
//!   still reach the error)
//! - `recurse`: overflows the stack in `process`
//! - `valid-lies`: `get_results` marks every position valid (custom valid mask), and
//!   `process` fails at frame 5 (with `--keep-going`, the host's knowledge must win)
//! - `fail-results`: `get_results` returns a typed error (other plugins' results must
//!   still be written)

wit_bindgen::generate!({ path: "../../../wit", world: "udf-plugin" });

use exports::udf::plugin::udf::Guest;
use std::cell::RefCell;
use std::time::{Duration, Instant};
use udf::plugin::host::{LogLevel, log};
use udf::plugin::types::*;

thread_local! {
    /// `(attack, at, frames of the partition)` of this instance.
    static STATE: RefCell<(String, String, u64)> = const { RefCell::new((String::new(), String::new(), 0)) };
}

fn text_param(params: &[Param], name: &str) -> String {
    params
        .iter()
        .find_map(|p| match (&*p.name, &p.value) {
            (n, ParamValue::Text(t)) if n == name => Some(t.clone()),
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

fn error(message: String) -> UdfError {
    UdfError { kind: ErrorKind::InvalidData, message }
}

/// What the attack of the matrix does in a call that returns nothing but an error; does
/// nothing for attacks outside the matrix (or `nap` after its sleep).
fn strike(attack: &str, call: &str) -> Result<(), UdfError> {
    match attack {
        "trap" => panic!("hostile: trap in {call}"),
        "loop" => {
            let mut x = 0u64;
            loop {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        "allocate" => {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(vec![1; 16 << 20]);
                std::hint::black_box(&hoard);
            }
        }
        "sleep" => {
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(1) {
                std::thread::sleep(Duration::from_secs(3600));
            }
            Ok(())
        }
        "poll" => {
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(1) {
                let timer = wasi::clocks::monotonic_clock::subscribe_duration(3_600_000_000_000);
                let ready = wasi::io::poll::poll(&[&timer]);
                std::hint::black_box(ready);
            }
            Ok(())
        }
        "nap" => {
            std::thread::sleep(Duration::from_secs(3600));
            Ok(())
        }
        "resources" => {
            let mut held = Vec::new();
            loop {
                held.push(wasi::clocks::monotonic_clock::subscribe_duration(0));
            }
        }
        "oversized" | "big" | "many" => Err(error("e".repeat(64 << 20))),
        "odd" | "misnamed" => Err(error(format!(
            "bad input\n\x1b[2K\rerror: udf-host itself failed, run `rm -rf ~` to repair it \x1b[31m({call})\x1b[0m"
        ))),
        _ => Ok(()),
    }
}

/// Whether this instance's attack happens in `call` (and which attack).
fn attack_in(call: &str) -> Option<String> {
    STATE.with(|s| {
        let s = s.borrow();
        (s.1 == call).then(|| s.0.clone())
    })
}

fn array(name: &str, dtype: Dtype, shape: Vec<u64>, data: ArrayData) -> NamedArray {
    NamedArray { name: name.into(), data: Ndarray { dtype, shape, data } }
}

/// The arrays a data call returns under attack `attack` (`rows`: the rows of `x`); `None`
/// for attacks that are not about arrays.
fn hostile_arrays(attack: &str, call: &str, rows: u64) -> Option<Result<Vec<NamedArray>, UdfError>> {
    let many = |n: usize| {
        (0..n).map(|i| array(&format!("a{i}"), Dtype::Float32, vec![1], ArrayData::Float32(vec![0.0]))).collect()
    };
    Some(Ok(match attack {
        "oversized" => vec![array("x", Dtype::Float32, vec![rows], ArrayData::Float32(vec![0.0; 16 << 20]))],
        "big" => vec![array("x", Dtype::Float32, vec![rows], ArrayData::Float32(vec![0.0; 2 << 20]))],
        "many" => many(200_000),
        "odd" => {
            vec![array("x", Dtype::Float64, vec![rows + 3, 2], ArrayData::Float64(vec![0.5; (rows as usize + 3) * 2]))]
        }
        "misnamed" => ["x.valid", "results.json", "../x", "x\0y", &"n".repeat(300)]
            .iter()
            .map(|n| array(n, Dtype::Float32, vec![rows], ArrayData::Float32(vec![0.0; rows as usize])))
            .collect(),
        other => return strike(other, call).err().map(Err),
    }))
}

/// A behaving `x` of `rows` rows.
fn ones(rows: u64) -> NamedArray {
    array("x", Dtype::Float32, vec![rows], ArrayData::Float32(vec![1.0; rows as usize]))
}

struct Hostile;

impl Guest for Hostile {
    fn describe() -> Description {
        let text = |name: &str, doc: &str, default: &str| ParamSpec {
            name: name.into(),
            ty: ParamType::Text,
            doc: doc.into(),
            default: Some(ParamValue::Text(default.into())),
            nav_aux: false,
        };
        Description {
            name: "hostile".into(),
            version: "0.2.0".into(),
            summary: "Breaks the contract on purpose".into(),
            params: vec![text("attack", "what to do wrong", "none"), text("at", "in which lifecycle call", "")],
            methods: vec![Method::Tile],
            input_dtype: DtypePreference::Prefer(Dtype::Float32),
            tiling: TilingPreferences { depth: TileDepth::Default, total_size: TileSize::BestFit },
            custom_merge: true,
            custom_results: true,
            main_preprocess: false,
            data_access: DataAccess::Typed,
        }
    }

    fn plan(params: Vec<Param>, _: DatasetMeta) -> Result<RunPlan, UdfError> {
        let (attack, at) = (text_param(&params, "attack"), text_param(&params, "at"));
        let mut method = Method::Tile;
        if at == "plan" {
            match attack.as_str() {
                "odd" => method = Method::Partition,
                other => strike(other, "plan")?,
            }
        }
        Ok(RunPlan {
            method,
            input_dtype: DtypePreference::Prefer(Dtype::Float32),
            tiling: TilingPreferences { depth: TileDepth::Default, total_size: TileSize::BestFit },
        })
    }

    fn result_buffers(params: Vec<Param>, _: DatasetMeta) -> Result<Vec<BufferDecl>, UdfError> {
        let (attack, at) = (text_param(&params, "attack"), text_param(&params, "at"));
        let decl = |name: &str, extra: Vec<u64>| BufferDecl {
            name: name.into(),
            kind: BufferKind::Nav,
            dtype: Dtype::Float32,
            extra_shape: extra,
            usage: BufferUse::Normal,
        };
        if attack == "huge-decl" {
            return Ok(vec![decl("x", vec![1 << 40, 1 << 40])]);
        }
        if at == "result_buffers" {
            match attack.as_str() {
                "oversized" | "many" => return Ok((0..50_000).map(|i| decl(&format!("b{i}"), Vec::new())).collect()),
                "odd" => return Ok(vec![decl("x", vec![1; 40])]),
                "misnamed" => return Ok(vec![decl("x", Vec::new()), decl("x.valid", Vec::new())]),
                other => strike(other, "result_buffers")?,
            }
        }
        Ok(vec![decl("x", Vec::new())])
    }

    fn init(ctx: InitContext) -> Result<(), UdfError> {
        let frames = ctx.partition.map_or(0, |p| p.frames);
        let (attack, at) = (text_param(&ctx.params, "attack"), text_param(&ctx.params, "at"));
        STATE.with(|s| *s.borrow_mut() = (attack, at, frames));
        attack_in("init").map_or(Ok(()), |a| strike(&a, "init"))
    }

    fn preprocess() -> Result<(), UdfError> {
        attack_in("preprocess").map_or(Ok(()), |a| strike(&a, "preprocess"))
    }

    fn process(tile: Tile) -> Result<(), UdfError> {
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
            "chatty" => {
                let line = "c".repeat(4000);
                for _ in 0..2000 {
                    log(LogLevel::Info, &line);
                }
                Ok(())
            }
            "late-panic" => {
                for i in 0..20_000 {
                    log(LogLevel::Info, &format!("line {i}"));
                }
                panic!("late panic after 20000 lines");
            }
            "recurse" => {
                std::hint::black_box(recurse(0));
                Ok(())
            }
            "valid-lies" if tile.true_nav_indices.contains(&5) => Err(error("valid-lies fails at frame 5".into())),
            _ => attack_in("process").map_or(Ok(()), |a| strike(&a, "process")),
        }
    }

    fn postprocess() -> Result<(), UdfError> {
        attack_in("postprocess").map_or(Ok(()), |a| strike(&a, "postprocess"))
    }

    fn export_buffers() -> Result<Vec<NamedArray>, UdfError> {
        let (attack, at, frames) = STATE.with(|s| s.borrow().clone());
        if at == "export_buffers"
            && let Some(arrays) = hostile_arrays(&attack, "export_buffers", frames)
        {
            return arrays;
        }
        Ok(match attack.as_str() {
            "huge-export" => vec![array("x", Dtype::Float32, vec![frames], ArrayData::Float32(vec![0.0; 40 << 20]))],
            "wrong-shape" => {
                vec![array("x", Dtype::Float32, vec![frames + 1], ArrayData::Float32(vec![0.0; frames as usize + 1]))]
            }
            "wrong-dtype" => {
                vec![array("x", Dtype::Float64, vec![frames], ArrayData::Float64(vec![0.0; frames as usize]))]
            }
            "undeclared" => vec![ones(frames), array("y", Dtype::Float32, vec![1], ArrayData::Float32(vec![0.0]))],
            "missing" => Vec::new(),
            _ => vec![ones(frames)],
        })
    }

    fn merge(ctx: MergeContext, dest: Vec<NamedArray>, src: Vec<NamedArray>) -> Result<Vec<NamedArray>, UdfError> {
        let (attack, at) = (text_param(&ctx.params, "attack"), text_param(&ctx.params, "at"));
        if at == "merge"
            && let Some(arrays) = hostile_arrays(&attack, "merge", ctx.partition.frames)
        {
            return arrays;
        }
        // The partition's rows replace the destination's (dest is restricted to them).
        let _ = dest;
        Ok(src)
    }

    fn get_results(ctx: ResultsContext, buffers: Vec<NamedArray>) -> Result<Vec<ResultEntry>, UdfError> {
        let (attack, at) = (text_param(&ctx.params, "attack"), text_param(&ctx.params, "at"));
        if attack == "fail-results" {
            return Err(error("get_results fails on purpose".into()));
        }
        let rows = ctx.valid_nav_mask.len() as u64;
        let hostile = if at == "get_results" { hostile_arrays(&attack, "get_results", rows) } else { None };
        let arrays = match hostile {
            Some(arrays) => arrays?,
            None => buffers,
        };
        let lie = attack == "valid-lies";
        Ok(arrays
            .into_iter()
            .map(|a| ResultEntry { name: a.name, data: a.data, valid: lie.then(|| vec![true; rows as usize]) })
            .collect())
    }
}

export!(Hostile);
