//! Finding the data in an HDF5 file: the group tree with external links followed
//! (DECTRIS master files), numbered data files joined into one series, the frame axes
//! of known layouts (Velox, EMD), RGB previews kept out of the automatic choice, and the
//! scan shape where an acquisition recorded it.

use super::{MAX_GROUPS, stored_dtype};
use crate::dtype::{DType, StoredDType};
use hdf5_reader::Hdf5File;
use hdf5_reader::group::Group;
use hdf5_reader::messages::HdfMessage;
use hdf5_reader::messages::link::{LinkMessage, LinkTarget};
use std::path::{Path, PathBuf};

/// A dataset array somewhere: the file that holds it and its path there.
#[derive(Clone)]
pub struct Located {
    /// The file holding the array (the master, or a data file it links to).
    pub file_path: PathBuf,
    pub file: Hdf5File,
    /// The path inside `file`.
    pub path: String,
    pub dataset: hdf5_reader::Dataset,
}

/// Which array axes form a frame and which the scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Axes {
    /// The scan axes, slowest first (C order over them is the frame index).
    pub nav: Vec<usize>,
    /// The frame axes, in frame order (rows, columns).
    pub sig: Vec<usize>,
}

impl Axes {
    /// The last two axes are the frame (the common layout).
    pub fn trailing(ndim: usize) -> Self {
        let k = ndim.min(2);
        Axes { nav: (0..ndim - k).collect(), sig: (ndim - k..ndim).collect() }
    }

    /// The frame is `sig` (array axes, in frame order); the others are the scan, in
    /// array order.
    ///
    /// # Errors
    /// An axis out of range or given twice.
    pub fn with_sig(ndim: usize, sig: &[usize]) -> Result<Self, String> {
        let mut seen = vec![false; ndim];
        for &a in sig {
            if a >= ndim || std::mem::replace(&mut seen[a], true) {
                return Err(format!("--sig-axes {sig:?} must name distinct axes of the {ndim}-D dataset (0..{ndim})"));
            }
        }
        if sig.is_empty() {
            return Err("--sig-axes names no axis".into());
        }
        Ok(Axes { nav: (0..ndim).filter(|a| !seen[*a]).collect(), sig: sig.to_vec() })
    }

    /// Whether this is the trailing layout (frames contiguous in C order).
    pub fn is_trailing(&self) -> bool {
        let n = self.nav.len() + self.sig.len();
        *self == Axes::trailing(n) || (self.nav.iter().chain(&self.sig).copied().eq(0..n))
    }
}

/// One dataset the file offers: a single array, or a series of numbered data files.
#[derive(Clone)]
pub struct Candidate {
    /// The name `--dataset-path` takes (a group path for a series).
    pub name: String,
    /// The arrays, joined along their first axis.
    pub parts: Vec<Located>,
    /// Shape of the joined array.
    pub shape: Vec<u64>,
    pub stored: Result<StoredDType, String>,
    /// Frame axes a known layout says (Velox, EMD), with where that comes from.
    pub layout: Option<(Axes, String)>,
    /// Numbered data files of a group joined (a DECTRIS master's `/entry/data`).
    pub series: bool,
    /// An axis of another dataset, not data: an HDF5 dimension scale (`CLASS` attribute
    /// `DIMENSION_SCALE`) or an EMD group's `dimN` array. Never chosen automatically.
    pub dimension_scale: bool,
}

impl Candidate {
    fn describe(&self) -> String {
        let dtype = self.stored.as_ref().map_or_else(|_| "non-numeric".to_owned(), |d| d.to_string());
        let files = if self.parts.len() > 1 { format!(", {} data files", self.parts.len()) } else { String::new() };
        format!("{} {:?} {dtype}{files}", self.name, self.shape)
    }

    /// An RGB(A) preview image (uint8 with a last axis of 3 or 4): never chosen automatically.
    pub fn is_preview(&self) -> bool {
        matches!(&self.stored, Ok(d) if d.dtype == DType::U8) && matches!(self.shape.last(), Some(3 | 4))
    }

    /// Elements of the array (saturating: only compared).
    pub fn elements(&self) -> u64 {
        self.shape.iter().fold(1u64, |n, &d| n.saturating_mul(d))
    }

    /// `name [shape] dtype`, for messages and `info`.
    pub fn summary(&self) -> String {
        self.describe()
    }
}

/// Whether `dataset` is an HDF5 dimension scale (`H5DSmake_scale`: attribute `CLASS`
/// = `DIMENSION_SCALE`).
fn is_dimension_scale(dataset: &hdf5_reader::Dataset) -> bool {
    dataset.attribute("CLASS").ok().and_then(|a| a.read_string().ok()).is_some_and(|c| c == "DIMENSION_SCALE")
}

/// Whether `name` is an EMD axis array (`dim1`, `dim2`, ...).
fn is_emd_dim(name: &str) -> bool {
    name.strip_prefix("dim").is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

/// The links of a group that point into other files: `(name, file, path)`, from compact
/// link messages and dense link storage.
fn external_links(file: &Hdf5File, group: &Group) -> Vec<(String, String, String)> {
    let Ok(header) = file.get_or_parse_header(group.address()) else { return Vec::new() };
    let mut links: Vec<LinkMessage> = Vec::new();
    for message in &header.messages {
        match message {
            HdfMessage::Link(link) => links.push(link.clone()),
            HdfMessage::LinkInfo(info) => {
                links.extend(dense_links(file, info.fractal_heap_address, info.btree_name_index_address))
            }
            _ => {}
        }
    }
    links
        .into_iter()
        .filter_map(|l| match l.target {
            LinkTarget::External { filename, path } => Some((l.name, filename, path)),
            _ => None,
        })
        .collect()
}

/// Link messages kept in a group's fractal heap (groups of more than 8 links).
fn dense_links(file: &Hdf5File, heap_address: u64, btree_address: u64) -> Vec<LinkMessage> {
    use hdf5_reader::btree_v2::{self, BTreeV2Record};
    use hdf5_reader::fractal_heap::{FractalHeap, FractalHeapDirectBlockCache};
    let sb = file.superblock();
    let (os, ls) = (sb.offset_size, sb.length_size);
    let undefined = |a: u64| a == u64::MAX || (os < 8 && a == (1u64 << (8 * u32::from(os))) - 1);
    if undefined(heap_address) || undefined(btree_address) {
        return Vec::new();
    }
    let storage = file.storage();
    let (Ok(heap), Ok(tree)) = (
        FractalHeap::parse_at_storage(storage, heap_address, os, ls),
        btree_v2::BTreeV2Header::parse_at_storage(storage, btree_address, os, ls),
    ) else {
        return Vec::new();
    };
    let Ok(records) = btree_v2::collect_btree_v2_records_storage(storage, &tree, os, ls, None, &[], None) else {
        return Vec::new();
    };
    let mut cache = FractalHeapDirectBlockCache::default();
    let mut out = Vec::new();
    for record in records {
        let (BTreeV2Record::LinkNameHash { heap_id, .. } | BTreeV2Record::CreationOrder { heap_id, .. }) = record
        else {
            continue;
        };
        let Ok(bytes) = heap.get_object_storage_cached_with_registry(&heap_id, storage, os, ls, &mut cache, None)
        else {
            continue;
        };
        let mut cursor = hdf5_reader::io::Cursor::new(&bytes);
        if let Ok(link) = hdf5_reader::messages::link::parse(&mut cursor, os, ls, bytes.len()) {
            out.push(link);
        }
    }
    out
}

/// Where HDF5 looks for the file of an external link `filename` of the file at `from`
/// (`H5Lcreate_external`): an absolute name as it is, else (and then its last component
/// only) under each directory of `$HDF5_EXT_PREFIX`, then next to `from` (where DECTRIS
/// writes the data files), then relative to the working directory. The first that
/// exists is the link's target.
pub fn link_candidates(from: &Path, filename: &str) -> Vec<PathBuf> {
    let name = Path::new(filename);
    let mut out = Vec::new();
    let target = if name.is_absolute() {
        out.push(name.to_owned());
        name.file_name().map_or_else(|| name.to_owned(), PathBuf::from)
    } else {
        name.to_owned()
    };
    if let Some(prefixes) = std::env::var_os("HDF5_EXT_PREFIX") {
        out.extend(std::env::split_paths(&prefixes).filter(|p| !p.as_os_str().is_empty()).map(|p| p.join(&target)));
    }
    let dir = from.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    out.push(dir.join(&target));
    out.push(target);
    out
}

/// Open the target of an external link `filename:path` of the file at `from`, found as
/// HDF5 finds it ([`link_candidates`]); only a regular file is followed (a FIFO or
/// device is an error, never waited on).
fn follow(from: &Path, filename: &str, path: &str) -> Result<Located, String> {
    let candidates = link_candidates(from, filename);
    let file_path = candidates.iter().find(|p| p.exists()).cloned().ok_or_else(|| {
        let tried: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
        format!("no such file (looked for {})", tried.join(", "))
    })?;
    let file = super::open_hdf5(&file_path).map_err(|e| e.to_string())?;
    let dataset = file.dataset(path).map_err(|e| format!("{}:{path}: {e}", file_path.display()))?;
    Ok(Located { file_path, file, path: path.to_owned(), dataset })
}

/// What walking the file found.
pub struct Walk {
    pub candidates: Vec<Candidate>,
    /// External links that could not be followed, as messages.
    pub broken: Vec<String>,
}

/// Every dataset of the file (following external links), numbered `data_NNNNNN` members
/// of a group also joined into one series candidate named after the group.
pub fn walk(file_path: &Path, file: &Hdf5File) -> Result<Walk, hdf5_reader::error::Error> {
    let mut candidates = Vec::new();
    let mut broken = Vec::new();
    let velox = velox_file(file);
    let mut seen = std::collections::HashSet::new();
    let mut stack = vec![(String::new(), file.root_group()?)];
    while let Some((prefix, group)) = stack.pop() {
        if !seen.insert(group.address()) || seen.len() > MAX_GROUPS {
            continue;
        }
        let (groups, datasets) = match group.members() {
            Ok(members) => members,
            Err(e) if !prefix.is_empty() => {
                broken.push(format!("group {prefix} ({e})"));
                continue;
            }
            Err(e) => return Err(e),
        };
        let mut here: Vec<(String, Located)> = datasets
            .into_iter()
            .map(|ds| {
                let name = ds.name().rsplit('/').next().unwrap_or(ds.name()).to_owned();
                let path = format!("{prefix}/{name}");
                (name, Located { file_path: file_path.to_owned(), file: file.clone(), path, dataset: ds })
            })
            .collect();
        for (name, filename, target) in external_links(file, &group) {
            match follow(file_path, &filename, &target) {
                Ok(located) => here.push((name, located)),
                Err(e) => broken.push(format!("{prefix}/{name} -> {filename}:{target} ({e})")),
            }
        }
        let emd = emd_dims(&group);
        for (name, located) in &here {
            let shape = located.dataset.shape().to_vec();
            let layout = if velox && prefix.starts_with("/Data/Image/") && name == "Data" && shape.len() == 3 {
                Some((Axes { nav: vec![2], sig: vec![0, 1] }, "Velox: images stored (height, width, frames)".into()))
            } else {
                emd.as_ref().and_then(|kind| emd_axes(*kind, name, shape.len()))
            };
            candidates.push(Candidate {
                name: format!("{prefix}/{name}"),
                parts: vec![located.clone()],
                shape,
                stored: stored_dtype(located.dataset.dtype()),
                layout,
                series: false,
                dimension_scale: is_dimension_scale(&located.dataset) || (emd.is_some() && is_emd_dim(name)),
            });
        }
        if let Some(series) = series(&prefix, &here) {
            candidates.push(series);
        }
        for g in groups {
            let name = format!("{prefix}/{}", g.name().rsplit('/').next().unwrap_or(g.name()));
            stack.push((name, g));
        }
    }
    candidates.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Walk { candidates, broken })
}

/// The candidate for a dataset path found directly in the file (no tree walk), with
/// the frame axes its layout says.
pub fn direct(file_path: &Path, file: &Hdf5File, path: &str) -> Option<Candidate> {
    let dataset = file.dataset(path).ok()?;
    let (parent, name) = path.rsplit_once('/')?;
    let shape = dataset.shape().to_vec();
    let layout = if velox_file(file) && parent.starts_with("/Data/Image/") && name == "Data" && shape.len() == 3 {
        Some((Axes { nav: vec![2], sig: vec![0, 1] }, "Velox: images stored (height, width, frames)".into()))
    } else {
        let group = if parent.is_empty() { file.root_group().ok()? } else { file.group(parent).ok()? };
        emd_dims(&group).and_then(|kind| emd_axes(kind, name, shape.len()))
    };
    let stored = stored_dtype(dataset.dtype());
    let dimension_scale = is_dimension_scale(&dataset);
    let located = Located { file_path: file_path.to_owned(), file: file.clone(), path: path.to_owned(), dataset };
    Some(Candidate {
        name: path.to_owned(),
        parts: vec![located],
        shape,
        stored,
        layout,
        series: false,
        dimension_scale,
    })
}

/// Numbered data arrays `data_000001`, `data_000002`, ... of one group (a DECTRIS master
/// file's `/entry/data`), joined along the frame axis when their frames agree.
fn series(prefix: &str, here: &[(String, Located)]) -> Option<Candidate> {
    let mut members: Vec<&(String, Located)> = here
        .iter()
        .filter(|(n, _)| {
            n.strip_prefix("data_").is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()))
        })
        .collect();
    members.sort_by(|a, b| a.0.cmp(&b.0));
    let first = &members.first()?.1;
    let frame = first.dataset.shape().get(1..)?.to_vec();
    let stored = stored_dtype(first.dataset.dtype());
    if frame.len() < 2
        || members
            .iter()
            .any(|(_, l)| l.dataset.shape().get(1..) != Some(&frame[..]) || stored_dtype(l.dataset.dtype()) != stored)
    {
        return None;
    }
    let frames: u64 = members.iter().map(|(_, l)| l.dataset.shape()[0]).sum();
    let mut shape = vec![frames];
    shape.extend(frame);
    Some(Candidate {
        name: if prefix.is_empty() { "/".into() } else { prefix.to_owned() },
        parts: members.iter().map(|(_, l)| l.clone()).collect(),
        shape,
        stored,
        layout: None,
        series: true,
        dimension_scale: false,
    })
}

/// Whether the file is a Thermo Fisher Velox EMD (`/Version` says `"format": "Velox"`).
fn velox_file(file: &Hdf5File) -> bool {
    let Ok(version) = file.dataset("/Version") else { return false };
    version.read_strings().is_ok_and(|v| v.iter().any(|s| s.contains("Velox")))
}

/// EMD array groups (`emd_group_type` 1 with `dim1`.. or `dim0`.. axis datasets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EmdKind {
    /// EMD 0.2 (`dim1`...): written transposed (HyperSpy, Prismatic real slices), except
    /// `datacube` arrays.
    V02,
    /// emdfile / py4DSTEM (`dim0`...): C order as the data is.
    V1,
}

fn emd_dims(group: &Group) -> Option<EmdKind> {
    let typed = group
        .attribute("emd_group_type")
        .ok()
        .is_some_and(|a| a.read_as_f64().is_ok_and(|v| v == 1.0) || a.read_string().is_ok_and(|s| s == "array"));
    if !typed {
        return None;
    }
    let (_, names) = group.member_names().ok()?;
    if names.iter().any(|n| n == "dim0") {
        Some(EmdKind::V1)
    } else if names.iter().any(|n| n == "dim1") {
        Some(EmdKind::V02)
    } else {
        None
    }
}

/// The frame axes of array `name` (rank `ndim`) in an EMD group, as rosettasciio's EMD
/// reader takes them: EMD 0.2 arrays other than `datacube` are stored transposed, so
/// the frame is array axes (1, 0) and the scan the others, last first.
fn emd_axes(kind: EmdKind, name: &str, ndim: usize) -> Option<(Axes, String)> {
    if name.starts_with("dim") || ndim < 2 || kind == EmdKind::V1 || name == "datacube" {
        return None;
    }
    let nav = (2..ndim).rev().collect();
    Some((Axes { nav, sig: vec![1, 0] }, "EMD 0.2: the array is stored transposed (HyperSpy, Prismatic)".into()))
}

/// The list of numeric datasets for messages.
pub fn listing(candidates: &[Candidate]) -> String {
    let numeric: Vec<String> = candidates.iter().filter(|c| c.stored.is_ok()).map(Candidate::describe).collect();
    if numeric.is_empty() {
        return "; the file holds no numeric dataset".into();
    }
    format!("; numeric datasets in the file: {}", numeric.join(", "))
}

/// The scan shape a DECTRIS acquisition recorded for a series: `NumPixelsY`/`NumPixelsX`
/// of the `STEM Metadata` group in `<name>.h5` next to `<name>_master.h5` (ARINA), or
/// `ntrigger` × `nimages` of the master's detectorSpecific group when both exceed 1.
pub fn dectris_scan(master: &Path, file: &Hdf5File, frames: u64) -> Option<(Vec<usize>, String)> {
    let name = master.file_name()?.to_str()?;
    let base = name.strip_suffix("_master.h5")?;
    let sidecar = master.with_file_name(format!("{base}.h5"));
    if let Ok(meta) = super::open_hdf5(&sidecar)
        && let Ok(group) = meta.group("/STEM Metadata")
    {
        let get = |key: &str| group.attribute(key).ok().and_then(|a| a.read_as_f64().ok());
        if let (Some(x), Some(y)) = (get("NumPixelsX"), get("NumPixelsY"))
            && x >= 1.0
            && y >= 1.0
            && (x * y) as u64 == frames
        {
            return Some((
                vec![y as usize, x as usize],
                format!("{} (STEM Metadata NumPixelsY, NumPixelsX)", sidecar.display()),
            ));
        }
    }
    let specific = file.group("/entry/instrument/detector/detectorSpecific").ok()?;
    let number = |key: &str| {
        specific.dataset(key).ok().and_then(|d| d.read_array::<u64>().ok()).and_then(|a| a.iter().next().copied())
    };
    let (triggers, images) = (number("ntrigger")?, number("nimages")?);
    (triggers > 1 && images > 1 && triggers * images == frames).then(|| {
        (
            vec![triggers as usize, images as usize],
            format!("{} (detectorSpecific ntrigger x nimages)", master.display()),
        )
    })
}
