//! EMPAD detector data (Thermo Fisher / Cornell): a `.raw` file of 128 × 128 float32
//! frames, each followed by a 2-row footer (`130 × 128` little-endian float32 in all),
//! described by an `.xml` file.
//!
//! The XML names the raw file (`<raw_file filename="...">`, looked up next to the XML)
//! and the scan: `<scan_parameters mode="acquire">` with `<scan_resolution_x>` and
//! `<scan_resolution_y>` for scans, or `<count>` for `<type>series</type>`; older
//! software writes `<pix_x>`/`<pix_y>` (the scan recorded) and
//! `<scan_parameters><series_count>`, which come first. If the raw file does not match
//! the acquire parameters, the `mode="search"` ones are tried (LiberTEM's fix-up), then
//! the raw file's name (`scan_x32_y64.raw`). An explicit `--nav-shape` that fits the raw
//! file wins over a mismatching XML. Opening the `.raw` directly needs `--format
//! empad` and takes the nav shape from `--nav-shape`.

use super::framed::{FramedFile, count_frames};
use super::reshaped::ShapeHints;
use super::{Dataset, DatasetError, DatasetShape, MappedFrames, OpenOptions};
use crate::dtype::{DType, StoredDType};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Frame shape.
pub const SIG: [usize; 2] = [128, 128];
/// Bytes per frame including the footer.
pub const STRIDE: u64 = 130 * 128 * 4;
const FRAME_BYTES: u64 = 128 * 128 * 4;

/// What the XML says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmpadXml {
    /// The raw file name as written.
    pub raw_file: String,
    /// Scan shape `[y, x]` per `scan_parameters` mode (`acquire`, `search`), or `[count]`.
    pub navs: Vec<(String, Vec<usize>)>,
}

impl EmpadXml {
    /// Parse the XML text.
    ///
    /// # Errors
    /// A message naming the missing or malformed element.
    pub fn parse(text: &str) -> Result<Self, String> {
        let elements = xml::parse(text)?;
        let find = |name: &str| elements.iter().find(|e| e.name == name);
        let raw_file = find("raw_file")
            .and_then(|e| e.attr("filename"))
            .ok_or("no <raw_file filename=\"...\"> element")?
            .to_owned();
        let number = |e: &xml::Element, what: &str| -> Result<usize, String> {
            e.text.trim().parse().map_err(|_| format!("<{what}> is '{}', not a number", e.text.trim()))
        };
        let kind = find("type").map(|e| e.text.trim().to_owned());
        let mut navs = Vec::new();
        // Older acquisition software: `<scan_parameters><series_count>` for a series,
        // `<pix_x>`/`<pix_y>` for the scan actually recorded (the scan_parameters there
        // are the settings, not the raw file's size).
        if let Some(count) = find("series_count") {
            navs.push(("series_count".into(), vec![number(count, "series_count")?]));
        }
        if let (Some(x), Some(y)) = (find("pix_x"), find("pix_y")) {
            navs.push(("pix_x/pix_y".into(), vec![number(y, "pix_y")?, number(x, "pix_x")?]));
        }
        match kind.as_deref() {
            None | Some("scan") => {
                for (i, e) in elements.iter().enumerate().filter(|(_, e)| e.name == "scan_parameters") {
                    let mode = e.attr("mode").unwrap_or_default().to_owned();
                    let child = |name: &str| elements.iter().find(|c| c.parent == Some(i) && c.name == name);
                    if let (Some(x), Some(y)) = (child("scan_resolution_x"), child("scan_resolution_y")) {
                        navs.push((mode, vec![number(y, "scan_resolution_y")?, number(x, "scan_resolution_x")?]));
                    }
                }
                // The raw file's name (`scan_x32_y64.raw`), as rosettasciio falls back to.
                if let Some(nav) = scan_from_name(&raw_file) {
                    navs.push(("raw file name".into(), nav));
                }
                if navs.is_empty() {
                    return Err("no <scan_parameters> with <scan_resolution_x> and <scan_resolution_y>, \
                         no <pix_x>/<pix_y>"
                        .into());
                }
            }
            Some("series") => match find("count") {
                Some(count) => navs.push(("series".into(), vec![number(count, "count")?])),
                None if navs.is_empty() => return Err("a series without <count> or <series_count>".into()),
                None => {}
            },
            Some(other) => return Err(format!("unknown <type> '{other}' (scan or series)")),
        }
        Ok(EmpadXml { raw_file, navs })
    }
}

/// `[y, x]` from a raw file named `..._x<X>_y<Y>.raw`.
fn scan_from_name(raw_file: &str) -> Option<Vec<usize>> {
    let name = raw_file.rsplit(['/', '\\']).next()?;
    let stem = name.rsplit_once('.').map_or(name, |(s, _)| s);
    let mut parts = stem.rsplit('_');
    let y = parts.next()?.strip_prefix('y')?.parse().ok()?;
    let x = parts.next()?.strip_prefix('x')?.parse().ok()?;
    Some(vec![y, x])
}

/// Open EMPAD data from its `.xml` or its `.raw` file.
///
/// # Errors
/// [`DatasetError`]: a bad XML, a missing raw file, a raw file whose size matches no
/// scan the XML describes.
pub(crate) fn open(path: &Path, options: &OpenOptions) -> Result<(Arc<dyn Dataset>, ShapeHints), DatasetError> {
    let is_xml = path.extension().and_then(|e| e.to_str()).is_some_and(|e| e.eq_ignore_ascii_case("xml"));
    let mut hints = ShapeHints::default();
    let raw: PathBuf = if is_xml {
        let text = std::fs::read(path).map_err(|source| DatasetError::Open { path: path.to_owned(), source })?;
        let xml = EmpadXml::parse(&String::from_utf8_lossy(&text))
            .map_err(|e| DatasetError::invalid(path, format!("not an EMPAD description: {e}")))?;
        let name = Path::new(&xml.raw_file.replace('\\', "/")).file_name().map(PathBuf::from).unwrap_or_default();
        let raw = path.parent().unwrap_or(Path::new(".")).join(name);
        let len = std::fs::metadata(&raw)
            .map_err(|e| {
                DatasetError::invalid(path, format!("the raw file {} it names cannot be read: {e}", raw.display()))
            })?
            .len();
        let frames = len / STRIDE;
        let order = ["series_count", "pix_x/pix_y", "acquire", "search", "series", "raw file name"];
        let mut navs = xml.navs.clone();
        navs.sort_by_key(|(mode, _)| order.iter().position(|o| o == mode).unwrap_or(order.len()));
        let fits = navs.iter().find(|(_, nav)| nav.iter().product::<usize>() as u64 * STRIDE == len);
        match fits {
            Some((mode, nav)) => {
                hints.nav = Some(nav.clone());
                hints.nav_source = Some(format!("{} ({mode})", path.display()));
            }
            // An explicit --nav-shape that fits the raw file wins over the XML.
            None if options.nav_shape.is_some() => {
                let described: Vec<String> = navs.iter().map(|(m, n)| format!("{n:?} ({m})")).collect();
                hints.warnings.push(format!(
                    "{} describes scans of {}, which do not fit the raw file ({len} bytes); --nav-shape is used",
                    path.display(),
                    described.join(" or ")
                ));
            }
            None => {
                let described: Vec<String> = navs.iter().map(|(m, n)| format!("{n:?} ({m})")).collect();
                return Err(DatasetError::invalid(
                    &raw,
                    format!(
                        "the file has {len} bytes ({frames} frames of {STRIDE} bytes and {} more), but {} describes \
                         scans of {}",
                        len % STRIDE,
                        path.display(),
                        described.join(" or ")
                    ),
                ));
            }
        }
        raw
    } else {
        path.to_owned()
    };
    let len = std::fs::metadata(&raw).map_err(|source| DatasetError::Open { path: raw.clone(), source })?.len();
    let (frames, incomplete) = count_frames(&raw, len, 0, STRIDE, FRAME_BYTES);
    if frames == 0 {
        return Err(DatasetError::invalid(&raw, incomplete.unwrap_or_else(|| "no frames".into())));
    }
    // A footer-less tail is a cut-off frame too.
    hints.incomplete = incomplete.or_else(|| {
        (len % STRIDE != 0).then(|| {
            format!(
                "{} is truncated: frame {frames} at offset {} has {} of {STRIDE} bytes",
                raw.display(),
                frames as u64 * STRIDE,
                len % STRIDE
            )
        })
    });
    let frames = (len / STRIDE) as usize;
    let shape = DatasetShape { nav: vec![frames], sig: SIG.to_vec() };
    let mapped = MappedFrames::open(&raw, 0, STRIDE as usize, StoredDType::le(DType::F32), shape)?;
    let details = vec![("raw_file".into(), raw.display().to_string()), ("footer_bytes".into(), "1024".into())];
    Ok((Arc::new(FramedFile::new(mapped, "empad", details)), hints))
}

/// Whether an `.xml` file's start looks like an EMPAD description.
pub fn sniff_xml(bytes: &[u8]) -> bool {
    let text = String::from_utf8_lossy(bytes);
    text.contains("<raw_file") || (text.contains("<root") && text.to_ascii_lowercase().contains("empad"))
}

/// A small XML reader: elements with attributes and text, enough for EMPAD's files.
mod xml {
    /// An element: name, attributes, direct text, parent index.
    #[derive(Debug, Clone)]
    pub struct Element {
        pub name: String,
        pub attrs: Vec<(String, String)>,
        pub text: String,
        pub parent: Option<usize>,
    }

    impl Element {
        pub fn attr(&self, name: &str) -> Option<&str> {
            self.attrs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
        }
    }

    fn unescape(s: &str) -> String {
        s.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", "\"").replace("&apos;", "'").replace("&amp;", "&")
    }

    /// All elements in document order.
    pub fn parse(text: &str) -> Result<Vec<Element>, String> {
        let mut elements: Vec<Element> = Vec::new();
        let mut stack: Vec<usize> = Vec::new();
        let mut rest = text;
        let mut pos = 0;
        while let Some(open) = rest.find('<') {
            if let Some(&top) = stack.last() {
                elements[top].text.push_str(&unescape(&rest[..open]));
            }
            let tag_start = &rest[open..];
            let skip = |end: &str| tag_start.find(end).map(|e| open + e + end.len());
            let consumed = if tag_start.starts_with("<?") {
                skip("?>")
            } else if tag_start.starts_with("<!--") {
                skip("-->")
            } else if tag_start.starts_with("<![CDATA[") {
                let end = skip("]]>");
                if let (Some(&top), Some(e)) = (stack.last(), end) {
                    elements[top].text.push_str(&rest[open + 9..e - 3]);
                }
                end
            } else if tag_start.starts_with("<!") {
                skip(">")
            } else {
                let close = tag_start.find('>').ok_or_else(|| format!("unclosed tag at byte {}", pos + open))?;
                let inner = &tag_start[1..close];
                if let Some(name) = inner.strip_prefix('/') {
                    let name = name.trim();
                    match stack.pop() {
                        Some(top) if elements[top].name == name => {}
                        _ => return Err(format!("unexpected </{name}> at byte {}", pos + open)),
                    }
                } else {
                    let self_closing = inner.ends_with('/');
                    let inner = inner.trim_end_matches('/');
                    let name_end = inner.find(|c: char| c.is_whitespace()).unwrap_or(inner.len());
                    let name = inner[..name_end].to_owned();
                    if name.is_empty() {
                        return Err(format!("a tag without a name at byte {}", pos + open));
                    }
                    let mut attrs = Vec::new();
                    let mut a = inner[name_end..].trim_start();
                    while !a.is_empty() {
                        let eq = a.find('=').ok_or_else(|| format!("malformed attribute in <{name}>"))?;
                        let key = a[..eq].trim().to_owned();
                        let v = a[eq + 1..].trim_start();
                        let quote = v.chars().next().filter(|c| *c == '"' || *c == '\'');
                        let quote = quote.ok_or_else(|| format!("unquoted attribute '{key}' in <{name}>"))?;
                        let end =
                            v[1..].find(quote).ok_or_else(|| format!("unclosed attribute '{key}' in <{name}>"))?;
                        attrs.push((key, unescape(&v[1..1 + end])));
                        a = v[end + 2..].trim_start();
                    }
                    elements.push(Element { name, attrs, text: String::new(), parent: stack.last().copied() });
                    if !self_closing {
                        stack.push(elements.len() - 1);
                    }
                }
                Some(open + close + 1)
            };
            let consumed = consumed.ok_or_else(|| format!("unterminated markup at byte {}", pos + open))?;
            pos += consumed;
            rest = &rest[consumed..];
        }
        Ok(elements)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_scan_and_series_descriptions() {
        let scan = r#"<?xml version="1.0"?>
            <root><!-- EMPAD -->
              <raw_file filename="C:\data\scan_x4_y3.raw"/>
              <scan_parameters mode="search"><scan_resolution_x>8</scan_resolution_x><scan_resolution_y>8</scan_resolution_y></scan_parameters>
              <scan_parameters mode="acquire"><scan_resolution_x>4</scan_resolution_x><scan_resolution_y>3</scan_resolution_y></scan_parameters>
            </root>"#;
        let x = EmpadXml::parse(scan).unwrap();
        assert_eq!(x.raw_file, r"C:\data\scan_x4_y3.raw");
        assert_eq!(
            x.navs,
            vec![("search".into(), vec![8, 8]), ("acquire".into(), vec![3, 4]), ("raw file name".into(), vec![3, 4])]
        );
        let series = "<root><type>series</type><count>17</count><raw_file filename='s.raw'></raw_file></root>";
        assert_eq!(EmpadXml::parse(series).unwrap().navs, vec![("series".into(), vec![17])]);
        assert!(EmpadXml::parse("<root><raw_file filename='a.raw'/></root>").is_err());
        assert!(EmpadXml::parse("<root><a></b></root>").is_err());
    }
}
