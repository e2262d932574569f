//! DM3/DM4 fixtures: a small, independent writer of Gatan's tag tree with one image (and
//! optionally a thumbnail and unrelated tags of every kind before it).

use crate::fixtures::{Data, Ty};
use std::path::Path;

/// A tag of the tree being written.
pub enum Tag {
    Group(Vec<(String, Tag)>),
    /// Type description ("info") and value bytes.
    Data(Vec<u64>, Vec<u8>),
    /// Type description and the length of values streamed in by [`write_streaming`]
    /// (at most one per file).
    Payload(Vec<u64>, u64),
}

/// What to write.
#[derive(Debug, Clone, Copy)]
pub struct DmOptions {
    /// 3 or 4.
    pub version: u32,
    /// Write values big-endian (byte-order flag 0).
    pub big_endian: bool,
    /// `ImageTags/Meta Data/Data Order Swapped` (absent if `None`).
    pub order_swapped: Option<bool>,
    /// Put a small thumbnail image first in `ImageList`.
    pub thumbnail: bool,
}

/// DM's image data type code.
pub fn data_type(ty: Ty) -> u32 {
    match ty {
        Ty::I16 => 1,
        Ty::F32 => 2,
        Ty::U8 => 6,
        Ty::I32 => 7,
        Ty::U16 => 10,
        Ty::U32 => 11,
        Ty::F64 => 12,
    }
}

/// The tag element type code of `ty`.
fn element(ty: Ty) -> u64 {
    match ty {
        Ty::I16 => 2,
        Ty::I32 => 3,
        Ty::U16 => 4,
        Ty::U32 => 5,
        Ty::F32 => 6,
        Ty::F64 => 7,
        Ty::U8 => 10,
    }
}

fn scalar(ty: Ty, v: f64, big: bool) -> Tag {
    Tag::Data(vec![element(ty)], ty.to_bytes(v, big))
}

fn text(s: &str, big: bool) -> Tag {
    let bytes = s.encode_utf16().flat_map(|u| if big { u.to_be_bytes() } else { u.to_le_bytes() }).collect();
    Tag::Data(vec![20, 4, s.len() as u64], bytes)
}

fn image(dims_fastest_first: &[usize], ty: Ty, values: &[f64], big: bool) -> Tag {
    let bytes: Vec<u8> = values.iter().flat_map(|&v| ty.to_bytes(v, big)).collect();
    let dims = dims_fastest_first.iter().map(|&d| (String::new(), scalar(Ty::U32, d as f64, big))).collect();
    Tag::Group(vec![
        ("Calibrations".into(), Tag::Group(vec![("Brightness".into(), Tag::Group(vec![]))])),
        ("Data".into(), Tag::Data(vec![20, element(ty), values.len() as u64], bytes)),
        ("DataType".into(), scalar(Ty::I32, f64::from(data_type(ty)), big)),
        ("Dimensions".into(), Tag::Group(dims)),
        ("PixelDepth".into(), scalar(Ty::U32, ty.size() as f64, big)),
    ])
}

/// The tag tree of a file holding `data` as `ty` in C order.
pub fn tree(data: &Data, ty: Ty, options: &DmOptions) -> Tag {
    let big = options.big_endian;
    let mut list = Vec::new();
    if options.thumbnail {
        let thumb = Tag::Group(vec![("ImageData".into(), image(&[4, 3], Ty::U8, &[7.0; 12], big))]);
        list.push((String::new(), thumb));
    }
    let dims: Vec<usize> = data.nav.iter().chain(&data.sig).rev().copied().collect();
    let mut meta = vec![("Format".to_owned(), text("Diffraction image", big))];
    if let Some(swapped) = options.order_swapped {
        meta.push(("Data Order Swapped".into(), Tag::Data(vec![8], vec![u8::from(swapped)])));
    }
    list.push((
        String::new(),
        Tag::Group(vec![
            ("ImageData".into(), image(&dims, ty, &data.values, big)),
            ("ImageTags".into(), Tag::Group(vec![("Meta Data".into(), Tag::Group(meta))])),
            ("Name".into(), text("4D scan", big)),
        ]),
    ));
    // Unrelated tags of every kind before the image list: a struct, an array of structs,
    // a string, a 64-bit integer, a boolean.
    Tag::Group(vec![
        ("ApplicationBounds".into(), Tag::Data(vec![15, 0, 4, 0, 3, 0, 3, 0, 3, 0, 3], vec![0; 16])),
        (
            "DocumentObjectList".into(),
            Tag::Group(vec![(
                String::new(),
                Tag::Group(vec![
                    ("AnnotationType".into(), scalar(Ty::I32, 20.0, big)),
                    ("Rects".into(), Tag::Data(vec![20, 15, 0, 2, 0, 6, 0, 7, 3], vec![0; 36])),
                    ("Label".into(), Tag::Data(vec![18, 5], b"hello".to_vec())),
                    ("UniqueID".into(), Tag::Data(vec![11], vec![0; 8])),
                    ("Visible".into(), Tag::Data(vec![8], vec![1])),
                ]),
            )]),
        ),
        ("ImageList".into(), Tag::Group(list)),
        ("InImageMode".into(), Tag::Data(vec![8], vec![1])),
    ])
}

fn word(out: &mut Vec<u8>, v: u64, dm4: bool) {
    if dm4 {
        out.extend(v.to_be_bytes());
    } else {
        out.extend((v as u32).to_be_bytes());
    }
}

/// Bytes of values in `tag` that are streamed in later.
fn payload_len(tag: &Tag) -> u64 {
    match tag {
        Tag::Group(c) => c.iter().map(|(_, t)| payload_len(t)).sum(),
        Tag::Data(..) => 0,
        Tag::Payload(_, len) => *len,
    }
}

/// Serialise a group; `payload_at` receives the position in `out` where streamed values
/// go (relative to `out`'s start).
fn group_bytes(children: &[(String, Tag)], dm4: bool, out: &mut Vec<u8>, payload_at: &mut Option<usize>) {
    out.extend([0, 1]);
    word(out, children.len() as u64, dm4);
    for (label, tag) in children {
        let mut body = Vec::new();
        let mut inner = None;
        let kind = match tag {
            Tag::Group(c) => {
                group_bytes(c, dm4, &mut body, &mut inner);
                20
            }
            Tag::Data(info, _) | Tag::Payload(info, _) => {
                body.extend(b"%%%%");
                word(&mut body, info.len() as u64, dm4);
                for &i in info {
                    word(&mut body, i, dm4);
                }
                match tag {
                    Tag::Data(_, bytes) => body.extend(bytes),
                    _ => inner = Some(body.len()),
                }
                21
            }
        };
        out.push(kind);
        out.extend((label.len() as u16).to_be_bytes());
        out.extend(label.as_bytes());
        if dm4 {
            out.extend((body.len() as u64 + payload_len(tag)).to_be_bytes());
        }
        if let Some(at) = inner {
            *payload_at = Some(out.len() + at);
        }
        out.extend(body);
    }
}

/// The file split where streamed values go: (before, after, values length).
fn file_parts(tree: &Tag, version: u32, big_endian: bool) -> (Vec<u8>, Vec<u8>, u64) {
    let dm4 = version == 4;
    let Tag::Group(children) = tree else { panic!("the root must be a group") };
    let mut body = Vec::new();
    let mut at = None;
    group_bytes(children, dm4, &mut body, &mut at);
    body.extend(vec![0u8; if dm4 { 16 } else { 8 }]);
    let len = payload_len(tree);
    let mut out = version.to_be_bytes().to_vec();
    word(&mut out, body.len() as u64 + len + 4, dm4);
    out.extend(u32::from(!big_endian).to_be_bytes());
    let at = out.len() + at.unwrap_or(body.len());
    out.extend(body);
    let after = out.split_off(at);
    (out, after, len)
}

/// Write a file whose `Tag::Payload` values come from `payload` (which must write
/// exactly the declared length).
pub fn write_streaming(
    path: &Path,
    tree: &Tag,
    version: u32,
    big_endian: bool,
    payload: &mut dyn FnMut(&mut dyn std::io::Write),
) {
    use std::io::Write;
    let (before, after, _) = file_parts(tree, version, big_endian);
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).expect("create DM file"));
    file.write_all(&before).expect("write");
    payload(&mut file);
    file.write_all(&after).expect("write");
    file.flush().expect("flush");
}

/// The bytes of a whole file with root `tree` (no streamed values).
pub fn file_bytes(tree: &Tag, version: u32, big_endian: bool) -> Vec<u8> {
    let (mut before, after, len) = file_parts(tree, version, big_endian);
    assert_eq!(len, 0, "use write_streaming for trees with a payload");
    before.extend(after);
    before
}

/// The tree of a file with one image of `dims` (C order) of `ty` streamed in later.
pub fn streamed_image_tree(dims: &[usize], ty: Ty) -> Tag {
    let count: usize = dims.iter().product();
    let fastest_first: Vec<(String, Tag)> =
        dims.iter().rev().map(|&d| (String::new(), scalar(Ty::U32, d as f64, false))).collect();
    let image = Tag::Group(vec![
        ("Data".into(), Tag::Payload(vec![20, element(ty), count as u64], (count * ty.size()) as u64)),
        ("DataType".into(), scalar(Ty::I32, f64::from(data_type(ty)), false)),
        ("Dimensions".into(), Tag::Group(fastest_first)),
    ]);
    let meta = Tag::Group(vec![("Data Order Swapped".into(), Tag::Data(vec![8], vec![1]))]);
    let entry = Tag::Group(vec![
        ("ImageData".into(), image),
        ("ImageTags".into(), Tag::Group(vec![("Meta Data".into(), meta)])),
    ]);
    Tag::Group(vec![("ImageList".into(), Tag::Group(vec![(String::new(), entry)]))])
}

/// A file holding one complex image (DataType 3 = complex64, 13 = complex128) as Gatan
/// writes it: `Data` is an array of `{real, imaginary}` structs of two floats.
/// `dims` is the C-order shape; `re`/`im` hold the values in C order.
pub fn complex_file(dims: &[usize], re: &[f64], im: &[f64], double: bool, options: &DmOptions) -> Vec<u8> {
    let big = options.big_endian;
    let ty = if double { Ty::F64 } else { Ty::F32 };
    let e = element(ty);
    let bytes: Vec<u8> =
        re.iter().zip(im).flat_map(|(&r, &i)| [ty.to_bytes(r, big), ty.to_bytes(i, big)].concat()).collect();
    let fastest_first = dims.iter().rev().map(|&d| (String::new(), scalar(Ty::U32, d as f64, big))).collect();
    let image = Tag::Group(vec![
        ("Data".into(), Tag::Data(vec![20, 15, 0, 2, 0, e, 0, e, re.len() as u64], bytes)),
        ("DataType".into(), scalar(Ty::I32, if double { 13.0 } else { 3.0 }, big)),
        ("Dimensions".into(), Tag::Group(fastest_first)),
        ("PixelDepth".into(), scalar(Ty::U32, (2 * ty.size()) as f64, big)),
    ]);
    let mut list = Vec::new();
    if options.thumbnail {
        let thumb = Tag::Group(vec![("ImageData".into(), image_tag(&[4, 3], Ty::U8, &[7.0; 12], big))]);
        list.push((String::new(), thumb));
    }
    list.push((String::new(), Tag::Group(vec![("ImageData".into(), image)])));
    let tree = Tag::Group(vec![("ImageList".into(), Tag::Group(list))]);
    file_bytes(&tree, options.version, big)
}

fn image_tag(dims_fastest_first: &[usize], ty: Ty, values: &[f64], big: bool) -> Tag {
    image(dims_fastest_first, ty, values, big)
}

/// Write `data` as a DM file of `ty`.
pub fn write(path: &Path, data: &Data, ty: Ty, options: &DmOptions) {
    let bytes = file_bytes(&tree(data, ty, options), options.version, options.big_endian);
    std::fs::write(path, bytes).expect("write DM fixture");
}
