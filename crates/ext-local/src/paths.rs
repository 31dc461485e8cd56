//! Paths under the root directory: parsing relative paths, normalising the root, and resolving a path
//! without ever leaving the root (no `..`, no absolute paths, no symbolic links pointing outside) nor, under a
//! [`Confinement`], entering a path the server keeps for itself.

use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};

use crate::confine::Confinement;

/// A validated, normalised path relative to the root: one or more plain components.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelativePath {
    components: Vec<String>,
}

impl RelativePath {
    /// The components, in order.
    pub fn components(&self) -> &[String] {
        &self.components
    }
}

impl fmt::Display for RelativePath {
    /// The normalised form with `/` separators, e.g. `docs/readme.md`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.components.join("/"))
    }
}

/// Why a path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathProblem {
    /// Nothing but separators and `.`.
    #[error("the path is empty; give a path relative to the root directory, e.g. 'notes/todo.txt'")]
    Empty,
    /// Starts with `/` (or `\`).
    #[error("the path '{0}' is absolute; give a path relative to the root directory")]
    Absolute(String),
    /// Has a `..` component.
    #[error("the path '{0}' contains '..'; paths must stay inside the root directory")]
    ParentComponent(String),
    /// Contains a NUL character.
    #[error("the path contains a NUL character")]
    Nul,
    /// A symbolic link on the way points outside the root.
    #[error("the path '{0}' leads outside the root directory through a symbolic link")]
    EscapesRoot(String),
    /// A symbolic link on the way cannot be resolved.
    #[error("the path '{0}' goes through a symbolic link whose target does not exist")]
    DanglingSymlink(String),
    /// A component before the last one is a file.
    #[error("a parent of '{0}' is a file, not a directory")]
    ParentNotDirectory(String),
    /// The path (directly or through a symbolic link) reaches a location the server keeps for itself.
    #[error(
        "the path '{0}' leads into a location this server keeps for itself (its data directory, tokens or key files)"
    )]
    Denied(String),
}

impl PathProblem {
    /// The error code reported to users.
    pub fn code(&self) -> &'static str {
        match self {
            PathProblem::EscapesRoot(_)
            | PathProblem::Absolute(_)
            | PathProblem::ParentComponent(_) => "PathOutsideRoot",
            PathProblem::ParentNotDirectory(_) => "ParentNotDirectory",
            PathProblem::Denied(_) => "PathDenied",
            _ => "InvalidPath",
        }
    }
}

/// Parses a path relative to the root. `.` components and repeated or trailing separators are dropped.
pub fn parse_relative_path(raw: &str) -> Result<RelativePath, PathProblem> {
    if raw.contains('\0') {
        return Err(PathProblem::Nul);
    }
    let looks_windows_absolute =
        raw.len() >= 2 && raw.as_bytes()[1] == b':' && raw.as_bytes()[0].is_ascii_alphabetic();
    if raw.starts_with('/') || raw.starts_with('\\') || looks_windows_absolute {
        return Err(PathProblem::Absolute(raw.to_owned()));
    }
    let mut components = Vec::new();
    for part in raw.split('/') {
        match part {
            "" | "." => {}
            ".." => return Err(PathProblem::ParentComponent(raw.to_owned())),
            other => components.push(other.to_owned()),
        }
    }
    if components.is_empty() {
        return Err(PathProblem::Empty);
    }
    Ok(RelativePath { components })
}

/// Makes `raw` absolute (relative to the working directory), resolves the symbolic links of its longest
/// existing prefix, and normalises the rest lexically. Stable whether or not the directory exists yet.
pub fn normalise_root(raw: &Path) -> io::Result<PathBuf> {
    let absolute = std::path::absolute(raw)?;
    let mut existing = absolute.clone();
    let mut missing: Vec<std::ffi::OsString> = Vec::new();
    loop {
        match existing.canonicalize() {
            Ok(canonical) => {
                let mut result = canonical;
                for component in missing.iter().rev() {
                    result.push(component);
                }
                return Ok(lexically_normal(&result));
            }
            Err(_) => match (
                existing.file_name().map(ToOwned::to_owned),
                existing.parent().map(Path::to_path_buf),
            ) {
                (Some(name), Some(parent)) => {
                    missing.push(name);
                    existing = parent;
                }
                // `..` at the end or the filesystem root itself: normalise what we have.
                _ => return Ok(lexically_normal(&absolute)),
            },
        }
    }
}

/// Removes `.` and resolves `..` textually (only used for parts of a path that do not exist).
fn lexically_normal(path: &Path) -> PathBuf {
    let mut result = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                result.pop();
            }
            other => result.push(other),
        }
    }
    result
}

/// Resolves `relative` under `root` (a [`normalise_root`] result), following symbolic links inside the
/// root and refusing any that lead outside it. The result may not exist.
pub fn resolve(root: &Path, relative: &RelativePath) -> Result<PathBuf, ResolveError> {
    resolve_confined(root, relative, None)
}

/// [`resolve`], also refusing a path that reaches a denied path of `confinement`, directly or through a
/// symbolic link. Every step is checked, so a link into a denied directory is refused even when what lies
/// past it would not exist.
pub fn resolve_confined(
    root: &Path,
    relative: &RelativePath,
    confinement: Option<&Confinement>,
) -> Result<PathBuf, ResolveError> {
    let shown = relative.to_string();
    let denied = |path: &Path| confinement.is_some_and(|c| c.is_denied(path));
    if denied(root) {
        return Err(ResolveError::Path(PathProblem::Denied(shown)));
    }
    let mut current = root.to_path_buf();
    let components = relative.components();
    for (index, component) in components.iter().enumerate() {
        let candidate = current.join(component);
        if denied(&candidate) {
            return Err(ResolveError::Path(PathProblem::Denied(shown)));
        }
        match std::fs::symlink_metadata(&candidate) {
            Ok(metadata) if metadata.file_type().is_symlink() => match candidate.canonicalize() {
                Ok(target) if denied(&target) => {
                    return Err(ResolveError::Path(PathProblem::Denied(shown)));
                }
                Ok(target) if target.starts_with(root) => current = target,
                Ok(_) => return Err(ResolveError::Path(PathProblem::EscapesRoot(shown))),
                Err(_) => return Err(ResolveError::Path(PathProblem::DanglingSymlink(shown))),
            },
            Ok(metadata) => {
                if !metadata.is_dir() && index + 1 < components.len() {
                    return Err(ResolveError::Path(PathProblem::ParentNotDirectory(shown)));
                }
                current = candidate;
            }
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                let mut result = candidate;
                for rest in &components[index + 1..] {
                    result.push(rest);
                }
                if denied(&result) {
                    return Err(ResolveError::Path(PathProblem::Denied(shown)));
                }
                return Ok(result);
            }
            Err(err) if err.kind() == io::ErrorKind::NotADirectory => {
                return Err(ResolveError::Path(PathProblem::ParentNotDirectory(shown)));
            }
            Err(err) => return Err(ResolveError::Io(err)),
        }
    }
    Ok(current)
}

/// Why resolution failed.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The path is refused.
    #[error(transparent)]
    Path(#[from] PathProblem),
    /// The filesystem failed.
    #[error("the filesystem failed: {0}")]
    Io(#[from] io::Error),
}

/// Parses an octal permission string such as `"0644"`, `"644"` or `"0o755"` (up to `7777`).
pub fn parse_mode(raw: &str) -> Option<u32> {
    let digits = raw.strip_prefix("0o").unwrap_or(raw);
    if digits.is_empty() || digits.len() > 4 || !digits.bytes().all(|b| (b'0'..=b'7').contains(&b))
    {
        return None;
    }
    u32::from_str_radix(digits, 8).ok()
}

/// Formats permission bits as four octal digits, e.g. `0644`.
pub fn format_mode(mode: u32) -> String {
    format!("{:04o}", mode & 0o7777)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_are_normalised() {
        let cases = [
            ("a.txt", "a.txt"),
            ("./a.txt", "a.txt"),
            ("dir//sub/./f", "dir/sub/f"),
            ("dir/", "dir"),
            ("name with spaces", "name with spaces"),
            ("back\\slash", "back\\slash"),
        ];
        for (raw, normal) in cases {
            assert_eq!(
                parse_relative_path(raw).unwrap().to_string(),
                normal,
                "{raw}"
            );
        }
    }

    #[test]
    fn escaping_paths_are_refused() {
        let cases = [
            ("", PathProblem::Empty),
            ("./", PathProblem::Empty),
            ("/etc/passwd", PathProblem::Absolute("/etc/passwd".into())),
            (
                "\\\\server\\share",
                PathProblem::Absolute("\\\\server\\share".into()),
            ),
            ("C:\\x", PathProblem::Absolute("C:\\x".into())),
            ("..", PathProblem::ParentComponent("..".into())),
            (
                "a/../../b",
                PathProblem::ParentComponent("a/../../b".into()),
            ),
            ("a\0b", PathProblem::Nul),
        ];
        for (raw, problem) in cases {
            assert_eq!(parse_relative_path(raw), Err(problem), "{raw:?}");
        }
        assert_eq!(
            parse_relative_path("..").unwrap_err().code(),
            "PathOutsideRoot"
        );
    }

    #[test]
    fn modes_parse_and_format() {
        assert_eq!(parse_mode("0644"), Some(0o644));
        assert_eq!(parse_mode("755"), Some(0o755));
        assert_eq!(parse_mode("0o600"), Some(0o600));
        assert_eq!(parse_mode("4755"), Some(0o4755));
        for bad in ["", "0o", "0888", "rw-r--r--", "12345", "-644"] {
            assert_eq!(parse_mode(bad), None, "{bad}");
        }
        assert_eq!(format_mode(0o100644), "0644");
    }

    #[test]
    fn root_normalisation_is_stable_before_and_after_creation() {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path().join("a/./b/../c");
        let before = normalise_root(&root).unwrap();
        std::fs::create_dir_all(temp.path().join("a/c")).unwrap();
        let after = normalise_root(&root).unwrap();
        assert_eq!(before, after);
        assert!(after.ends_with("a/c"), "{}", after.display());
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_inside_are_followed_and_outside_refused() {
        let temp = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = normalise_root(temp.path()).unwrap();
        std::fs::create_dir(root.join("real")).unwrap();
        std::os::unix::fs::symlink(root.join("real"), root.join("inside")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("outside")).unwrap();
        std::os::unix::fs::symlink(root.join("nothing"), root.join("dangling")).unwrap();
        std::fs::write(root.join("file"), "x").unwrap();

        let path = |raw: &str| parse_relative_path(raw).unwrap();
        assert_eq!(
            resolve(&root, &path("inside/new.txt")).unwrap(),
            root.join("real/new.txt")
        );
        assert_eq!(resolve(&root, &path("a/b")).unwrap(), root.join("a/b"));
        assert!(matches!(
            resolve(&root, &path("outside/x")),
            Err(ResolveError::Path(PathProblem::EscapesRoot(_)))
        ));
        assert!(matches!(
            resolve(&root, &path("outside")),
            Err(ResolveError::Path(PathProblem::EscapesRoot(_)))
        ));
        assert!(matches!(
            resolve(&root, &path("dangling")),
            Err(ResolveError::Path(PathProblem::DanglingSymlink(_)))
        ));
        assert!(matches!(
            resolve(&root, &path("file/x")),
            Err(ResolveError::Path(PathProblem::ParentNotDirectory(_)))
        ));
    }

    #[cfg(unix)]
    #[test]
    fn denied_paths_are_refused_directly_and_through_links() {
        let temp = tempfile::tempdir().unwrap();
        let root = normalise_root(temp.path()).unwrap();
        std::fs::create_dir(root.join("data")).unwrap();
        std::fs::write(root.join("secret"), "s").unwrap();
        std::fs::create_dir(root.join("open")).unwrap();
        std::os::unix::fs::symlink(root.join("data"), root.join("open/to-data")).unwrap();
        std::os::unix::fs::symlink(root.join("secret"), root.join("open/to-secret")).unwrap();
        let confinement =
            Confinement::new([root.clone()], [root.join("data"), root.join("secret")]).unwrap();

        let path = |raw: &str| parse_relative_path(raw).unwrap();
        for raw in [
            "data",
            "data/new/deeper.txt",
            "secret",
            "open/to-data/x",
            "open/to-secret",
        ] {
            assert!(
                matches!(
                    resolve_confined(&root, &path(raw), Some(&confinement)),
                    Err(ResolveError::Path(PathProblem::Denied(_)))
                ),
                "{raw}"
            );
            assert!(resolve(&root, &path(raw)).is_ok(), "unconfined: {raw}");
        }
        assert_eq!(
            resolve_confined(&root, &path("open/new.txt"), Some(&confinement)).unwrap(),
            root.join("open/new.txt")
        );
        assert_eq!(PathProblem::Denied("x".into()).code(), "PathDenied");
    }
}
