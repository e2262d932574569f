//! `index.html`: one self-contained page about a run — the summary of `results.json`
//! and every preview, inlined as `data:` URIs, so the file opens from a file manager and
//! can be mailed. It loads nothing (a Content-Security-Policy forbids every fetch but
//! `data:` images) and runs no script. All text from plugins and files (names, params,
//! errors, paths) is HTML-escaped.

use crate::preview::{Preview, short_number};
use crate::report::RunSummary;
use base64::Engine;
use serde_json::Value;
use std::fmt::Write;

/// `text` with `& < > " '` escaped, safe in element content and quoted attributes.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A JSON value as escaped text: strings as they are, everything else as compact JSON.
fn text(v: &Value) -> String {
    match v {
        Value::Null => "–".into(),
        Value::String(s) => escape(s),
        other => escape(&other.to_string()),
    }
}

/// A shape `[32, 64]` as `32 × 64`.
fn shape(v: &Value) -> String {
    match v.as_array() {
        Some(dims) if !dims.is_empty() => dims.iter().map(text).collect::<Vec<_>>().join(" × "),
        Some(_) => "()".into(),
        None => text(v),
    }
}

/// A number with `decimals` decimals, or `–`.
fn number(v: &Value, decimals: usize) -> String {
    v.as_f64().map_or_else(|| "–".into(), |f| format!("{f:.decimals$}"))
}

fn row(out: &mut String, key: &str, value: &str) {
    let _ = write!(out, "<tr><th>{key}</th><td>{value}</td></tr>");
}

const STYLE: &str = "
body { font: 15px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1200px; padding: 1em 2em; color: #222; }
h1 { margin-bottom: 0.1em; } h2 { border-bottom: 1px solid #ccc; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.4em 0; } th, td { text-align: left; padding: 2px 12px 2px 0; vertical-align: top; }
th { font-weight: 600; color: #555; } code, .mono { font-family: ui-monospace, monospace; font-size: 90%; }
.status { display: inline-block; padding: 1px 10px; border-radius: 10px; color: #fff; font-weight: 600; }
.status-complete { background: #2a7d2a; } .status-running { background: #1f5fa8; }
.status-partial, .status-interrupted { background: #b26b00; } .status-failed { background: #b00020; }
.udf { border: 1px solid #ddd; border-radius: 6px; padding: 0.4em 1em 1em; margin: 1em 0; }
.buffer { margin: 1em 0 0; } .buffer h4 { margin: 0.2em 0; } .meta { color: #555; margin: 0.1em 0 0.4em; }
.previews { display: flex; flex-wrap: wrap; gap: 12px; }
figure { margin: 0; } figure img { max-width: 100%; height: auto; image-rendering: pixelated; border: 1px solid #eee; }
figcaption { font-size: 85%; color: #444; max-width: 420px; }
.none { color: #777; font-style: italic; } .error { color: #b00020; white-space: pre-wrap; }
";

/// The page for `summary` (what `results.json` holds) with `previews` inlined.
/// `refresh`: reload every so many seconds (the live page of `partial/`). `previews_on`:
/// whether previews were asked for (otherwise the page says how to get them).
pub fn page(summary: &RunSummary, previews: &[Preview], previews_on: bool, refresh: Option<u64>) -> String {
    // The page reads the summary in its JSON form, field by field as results.json has it.
    let summary = &serde_json::to_value(summary).unwrap_or_default();
    let status = summary["status"].as_str().unwrap_or("unknown");
    let dataset = &summary["dataset"];
    let name = dataset["path"].as_str().and_then(|p| p.rsplit(['/', '\\']).next()).unwrap_or("results");
    let mut out = String::new();
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    out.push_str(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src data:; style-src 'unsafe-inline'\">\n",
    );
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    if let Some(seconds) = refresh {
        let _ = writeln!(out, "<meta http-equiv=\"refresh\" content=\"{seconds}\">");
    }
    let _ = writeln!(out, "<title>udf-host: {} ({})</title>", escape(name), escape(status));
    let _ = writeln!(out, "<style>{STYLE}</style></head><body>");
    let _ = writeln!(
        out,
        "<h1>udf-host results: {}</h1>\n<p><span class=\"status status-{1}\">{1}</span>{2}</p>",
        escape(name),
        escape(status),
        match summary["snapshot"].as_u64() {
            Some(n) => format!(
                " snapshot {n} of a running run, {} s in; this page reloads itself",
                number(&summary["elapsed_seconds"], 1)
            ),
            None => String::new(),
        }
    );
    run_table(&mut out, summary);
    failures(&mut out, &summary["failures"]);
    let _ = writeln!(out, "<h2>Plugins and results</h2>");
    for udf in summary["udfs"].as_array().into_iter().flatten() {
        udf_section(&mut out, udf, previews, previews_on);
    }
    let _ = writeln!(
        out,
        "<p class=\"meta\">Written by udf-host {} (contract {}). The files are beside this page; \
         <code>results.json</code> has everything above.</p></body></html>",
        text(&summary["udf_host_version"]),
        text(&summary["contract"])
    );
    out
}

fn run_table(out: &mut String, s: &Value) {
    let d = &s["dataset"];
    let _ = writeln!(out, "<h2>Run</h2><table>");
    row(out, "dataset", &format!("<code>{}</code> ({})", text(&d["path"]), text(&d["format"])));
    row(out, "shape", &format!("nav {}, sig {}", shape(&d["nav_shape"]), shape(&d["sig_shape"])));
    row(out, "dtype", &format!("stored <code>{}</code>, input {}", text(&d["dtype"]), text(&s["input_dtype"])));
    if let Some(roi) = s["roi"].as_object() {
        row(out, "ROI", &format!("{} of {} positions", text(&roi["count"]), text(&roi["positions"])));
    }
    let p = &s["partitions"];
    row(
        out,
        "partitions",
        &format!(
            "{} ({} merged, {} failed) on {} threads",
            text(&p["count"]),
            text(&p["merged"]),
            text(&p["failed"]),
            text(&s["threads"])
        ),
    );
    if s["tiling"].is_object() {
        let t = &s["tiling"];
        row(
            out,
            "tiles",
            &format!(
                "{} ({} intent, {} signal slices)",
                shape(&t["tile_shape"]),
                text(&t["intent"]),
                text(&t["signal_slices"])
            ),
        );
    }
    let mb = s["bytes_read"].as_f64().map_or_else(|| "–".into(), |b| format!("{:.1}", b / 1e6));
    row(
        out,
        "data",
        &format!("{} frames, {mb} MB read, {} GB/s", text(&s["frames"]), number(&s["throughput_gb_per_s"], 3)),
    );
    if let Some(timings) = s["timings"].as_object() {
        let parts: Vec<String> = timings
            .iter()
            .map(|(k, v)| format!("{} {} s", escape(k.trim_end_matches("_seconds")), number(v, 3)))
            .collect();
        row(out, "timings", &parts.join(", "));
    }
    if let Some(plugins) = s["plugins"].as_array() {
        let loads: Vec<String> = plugins
            .iter()
            .map(|p| {
                format!(
                    "<code>{}</code> ({}, {} s)",
                    text(&p["source"]),
                    text(&p["cache"]),
                    number(&p["load_seconds"], 3)
                )
            })
            .collect();
        row(out, "loaded", &loads.join("<br>"));
    }
    out.push_str("</table>\n");
}

fn failures(out: &mut String, failures: &Value) {
    let Some(list) = failures.as_array().filter(|l| !l.is_empty()) else { return };
    let _ = writeln!(
        out,
        "<h2>Failures</h2><table><tr><th>partition</th><th>frames</th><th>plugin</th><th>at</th><th>error</th></tr>"
    );
    for f in list {
        let at = &f["at"];
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"error\">{}</td></tr>",
            text(&f["partition"]),
            shape(&f["frames"]).replace(" × ", "–"),
            text(&f["udf"]),
            if at.is_object() { text(&at["method"]) } else { "–".into() },
            text(&f["error"])
        );
    }
    out.push_str("</table>\n");
}

fn udf_section(out: &mut String, udf: &Value, previews: &[Preview], previews_on: bool) {
    let name = udf["name"].as_str().unwrap_or_default();
    let _ = writeln!(
        out,
        "<div class=\"udf\"><h3>{}</h3><p class=\"meta\"><code>{}</code>, version {}, {} method</p>",
        escape(name),
        text(&udf["source"]),
        text(&udf["version"]),
        text(&udf["method"])
    );
    match udf["params"].as_object().filter(|p| !p.is_empty()) {
        Some(params) => {
            out.push_str("<table>");
            for (k, v) in params {
                row(out, &escape(k), &format!("<span class=\"mono\">{}</span>", text(v)));
            }
            out.push_str("</table>\n");
        }
        None => out.push_str("<p class=\"meta\">no parameters</p>\n"),
    }
    for b in udf["buffers"].as_array().into_iter().flatten() {
        let buffer = b["name"].as_str().unwrap_or_default();
        let coverage = b["valid_fraction"].as_f64().map_or_else(|| "–".into(), |f| format!("{:.1} %", f * 100.0));
        let _ = writeln!(
            out,
            "<div class=\"buffer\"><h4>{}</h4><p class=\"meta\">{} buffer, shape {}, {}, valid {coverage}; <code>{}</code></p>",
            escape(buffer),
            text(&b["kind"]),
            shape(&b["shape"]),
            text(&b["dtype"]),
            text(&b["file"])
        );
        let mine: Vec<&Preview> = previews.iter().filter(|p| p.udf == name && p.buffer == buffer).collect();
        if mine.is_empty() {
            let why = if previews_on { "not an image" } else { "no preview (run with --preview)" };
            let _ = writeln!(out, "<p class=\"none\">{why}</p>");
        } else {
            out.push_str("<div class=\"previews\">");
            for p in &mine {
                figure(out, p);
            }
            if let Some(first) = mine.first().filter(|f| f.slices > mine.len()) {
                let _ = write!(out, "<p class=\"none\">the first {} of {} slices</p>", mine.len(), first.slices);
            }
            out.push_str("</div>\n");
        }
        out.push_str("</div>\n");
    }
    out.push_str("</div>\n");
}

fn figure(out: &mut String, p: &Preview) {
    let r = &p.rendered;
    let slice = if p.index.is_empty() {
        String::new()
    } else {
        format!("[{}] ", p.index.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))
    };
    let range = match r.range {
        Some([lo, hi]) => format!("colours {} to {}", short_number(lo), short_number(hi)),
        None => "no valid value".into(),
    };
    let extent =
        r.extent.map_or_else(String::new, |[lo, hi]| format!(", values {} to {}", short_number(lo), short_number(hi)));
    let invalid = if r.invalid > 0 { format!(", {} pixels invalid (grey)", r.invalid) } else { String::new() };
    let _ = write!(
        out,
        "<figure><img src=\"data:image/png;base64,{}\" width=\"{}\" height=\"{}\" alt=\"{}\">\
         <figcaption>{}{} × {}, {} {}, {range}{extent}{invalid}</figcaption></figure>",
        base64::engine::general_purpose::STANDARD.encode(&r.png),
        r.width,
        r.height,
        escape(&p.file),
        escape(&slice),
        r.image_shape[0],
        r.image_shape[1],
        r.scale.name(),
        r.colormap.name()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_covers_markup_and_quotes() {
        assert_eq!(escape("<b a='1' c=\"2\">&</b>"), "&lt;b a=&#39;1&#39; c=&quot;2&quot;&gt;&amp;&lt;/b&gt;");
    }
}
