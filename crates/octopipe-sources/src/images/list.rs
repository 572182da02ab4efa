//! The files an `images` location names: a folder, one image, or a glob, in file-name order.

use std::path::{Path, PathBuf};

use super::sequence::{file_name, ImageKind, ImageList};
use crate::SourceError;
use octopipe_core::files::RunPath;
/// The image files of a folder or glob, in file-name order, all of one kind.
pub(crate) fn list_images(location: &str) -> Result<ImageList, SourceError> {
    let input_error = |path: &Path, reason: String| SourceError::input(path.display(), reason);
    let files = matching_files(location)?;
    let Some(first) = files.first() else {
        return Err(SourceError::input(location, "no .jpg, .jpeg or .png files"));
    };
    let kind = ImageKind::of(first)
        .ok_or_else(|| input_error(first, "not a .jpg, .jpeg or .png file".into()))?;
    if let Some(odd) = files.iter().find(|f| ImageKind::of(f) != Some(kind)) {
        let reason = match ImageKind::of(odd) {
            Some(other) => format!(
                "is {} but {} starts a {} sequence: mixed image formats are not supported",
                other.name(),
                file_name(first),
                kind.name()
            ),
            None => "not a .jpg, .jpeg or .png file".into(),
        };
        return Err(input_error(odd, reason));
    }
    Ok(ImageList {
        location: location.to_string(),
        gray16: kind == ImageKind::Png && is_gray16_png(first),
        files,
        kind,
    })
}

/// Whether the PNG file at `path` holds one 16-bit grey band: its IHDR chunk (bytes 16..29 of the
/// file) says bit depth 16 and colour type 0 (grey) or 4 (grey and alpha, the alpha dropped).
fn is_gray16_png(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 26];
    let read = std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut head));
    read.is_ok() && &head[12..16] == b"IHDR" && head[24] == 16 && matches!(head[25], 0 | 4)
}

/// The files `location` names, sorted by file name: those matching its last component when that
/// is a glob, the one image a file is (a sequence of one frame), else the image files of the
/// folder.
pub(crate) fn matching_files(location: &str) -> Result<Vec<PathBuf>, SourceError> {
    let input_error = |path: &Path, reason: String| SourceError::input(path.display(), reason);
    let path = Path::new(location);
    if path.is_file() {
        return match ImageKind::of(path) {
            Some(_) => Ok(vec![path.to_path_buf()]),
            None => Err(input_error(
                path,
                "is a file but not a .jpg, .jpeg or .png image: `images` plays one image, a folder of them or a glob (location=\"DIR/*.jpg\"); a video file is `media location=...`".into(),
            )),
        };
    }
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let (dir, pattern) = if name.contains(['*', '?']) {
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        (dir, Some(name))
    } else {
        (path, None)
    };
    let entries = std::fs::read_dir(dir).map_err(|e| SourceError::io(dir.display(), e))?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| SourceError::io(dir.display(), e))?;
        let file = entry.path();
        let Some(name) = file.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let wanted = match pattern {
            Some(pattern) => glob_match(pattern, name),
            None => ImageKind::of(&file).is_some(),
        };
        if wanted && file.is_file() {
            files.push(file);
        }
    }
    files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    Ok(files)
}

/// Shell-style match of a file name: `*` any run of characters, `?` one character.
fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // Classic greedy matcher with backtracking to the last `*`.
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ni));
                pi += 1;
            }
            Some(&c) if c == '?' || c == n[ni] => {
                pi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    pi = sp + 1;
                    ni = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// What an `images` location reads: the folder, the one image, or the files its glob matches (a
/// folder or glob that cannot be read reads nothing; opening the source reports it).
pub(crate) fn inputs(location: &str) -> Vec<RunPath> {
    let name = std::path::Path::new(location)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("");
    if std::path::Path::new(location).is_file() {
        return vec![RunPath::file("images location", location)];
    }
    if !name.contains(['*', '?']) {
        return vec![RunPath::folder("images location", location)];
    }
    matching_files(location)
        .unwrap_or_default()
        .into_iter()
        .map(|file| RunPath::file("images location", file))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn glob() {
        assert!(glob_match("*.jpg", "a.jpg"));
        assert!(glob_match("img_??.png", "img_01.png"));
        assert!(!glob_match("img_??.png", "img_1.png"));
        assert!(glob_match("*_d_*.jpg", "9999999_00023_d_0000001.jpg"));
        assert!(!glob_match("*.jpg", "a.jpeg"));
        assert!(glob_match("*", "x"));
        assert!(glob_match("a*b*c", "aXbYbZc"));
    }
}
