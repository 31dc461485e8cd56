//! The `File` and `Directory` resource handlers.
//!
//! Filesystem work runs on tokio's blocking pool. A `File` exists when a regular file (or a symbolic link
//! inside the root to one) is at its path; a `Directory` when a directory is. Deleting a directory only
//! removes it when it holds no file (empty, or holding only empty directories, such as the parents a `File` made
//! for itself): it may hold files nobody declared, which a deployment must never destroy.

use std::io;
use std::path::{Path, PathBuf};

use cairn_extension_sdk::{
    Applied, Apply, Deleted, ExtensionError, Lookup, PreviewInput, PreviewOutput, ResourceHandler,
    ResourcePreviewMetadata, ResourceState, Validator,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::config::LocalConfig;
use crate::paths::{
    PathProblem, RelativePath, ResolveError, format_mode, parse_mode, parse_relative_path,
    resolve_confined,
};

/// Resource type name of files.
pub const FILE_TYPE: &str = "File";
/// Resource type name of directories.
pub const DIRECTORY_TYPE: &str = "Directory";

/// `File` properties.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileProperties {
    /// Path relative to the root directory.
    pub path: String,
    /// UTF-8 text content (empty when omitted).
    #[serde(default)]
    pub content: String,
    /// Octal permission bits such as `"0644"`; when omitted, new files get the process default
    /// (0666 less the umask) and existing files keep theirs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

/// `Directory` properties.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DirectoryProperties {
    /// Path relative to the root directory.
    pub path: String,
}

/// The identifiers of both types: `{ path }` (normalised, relative to the root directory).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PathIdentifiers {
    /// Normalised relative path, e.g. `docs/readme.md`.
    pub path: String,
}

fn path_error(problem: &PathProblem, target: &str) -> ExtensionError {
    ExtensionError::invalid(
        problem.code(),
        target,
        format!("{}.", capitalise(&problem.to_string())),
    )
}

fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn io_error(action: &str, path: &RelativePath, err: &io::Error) -> ExtensionError {
    ExtensionError::internal(format!("Could not {action} '{path}': {}.", err.kind()))
}

fn resolve_at(
    config: &LocalConfig,
    path: &RelativePath,
    target: &str,
) -> Result<PathBuf, ExtensionError> {
    resolve_confined(config.root(), path, config.confinement()).map_err(|err| match err {
        ResolveError::Path(problem) => path_error(&problem, target),
        ResolveError::Io(err) => io_error("inspect", path, &err),
    })
}

/// Runs filesystem work off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ExtensionError> + Send + 'static,
) -> Result<T, ExtensionError> {
    tokio::task::spawn_blocking(work).await.unwrap_or_else(|_| {
        Err(ExtensionError::internal(
            "The filesystem task failed unexpectedly.",
        ))
    })
}

fn ensure_root(config: &LocalConfig) -> Result<(), ExtensionError> {
    match std::fs::metadata(config.root()) {
        Ok(metadata) if metadata.is_dir() => Ok(()),
        Ok(_) => Err(ExtensionError::invalid(
            "RootDirectoryNotADirectory",
            "/config/rootDirectory",
            "The root directory names a file, not a directory.",
        )),
        Err(err) if err.kind() == io::ErrorKind::NotFound => std::fs::create_dir_all(config.root())
            .map_err(|err| {
                ExtensionError::internal(format!(
                    "Could not create the root directory: {}.",
                    err.kind()
                ))
            }),
        Err(err) => Err(ExtensionError::internal(format!(
            "Could not inspect the root directory: {}.",
            err.kind()
        ))),
    }
}

#[cfg(unix)]
fn mode_of(metadata: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    metadata.permissions().mode() & 0o7777
}

#[cfg(not(unix))]
fn mode_of(metadata: &std::fs::Metadata) -> u32 {
    if metadata.permissions().readonly() {
        0o444
    } else {
        0o666
    }
}

#[cfg(unix)]
fn set_mode(file: &std::fs::File, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    file.set_permissions(std::fs::Permissions::from_mode(mode))
}

#[cfg(not(unix))]
fn set_mode(file: &std::fs::File, mode: u32) -> io::Result<()> {
    let mut permissions = file.metadata()?.permissions();
    permissions.set_readonly(mode & 0o222 == 0);
    file.set_permissions(permissions)
}

/// A file's current state: `None` when no regular file is there.
///
/// `resolved` has no symbolic link left in it, so the file is opened without following one: a link put
/// there since it was resolved is refused rather than followed, and what was opened is checked again.
fn read_file(
    config: &LocalConfig,
    resolved: &Path,
    path: &RelativePath,
) -> Result<Option<(String, u32)>, ExtensionError> {
    // A FIFO or device is no File: looking first keeps the open from blocking on one.
    match std::fs::metadata(resolved) {
        Ok(metadata) if metadata.is_file() => {}
        Ok(_) => return Ok(None),
        Err(err)
            if matches!(
                err.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            return Ok(None);
        }
        Err(err) => return Err(io_error("read", path, &err)),
    }
    let mut file = match open_no_follow(resolved) {
        Ok(file) => file,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) if is_symlink_loop(&err) => return Err(moved_error(path)),
        Err(err) => return Err(io_error("read", path, &err)),
    };
    let metadata = file
        .metadata()
        .map_err(|err| io_error("read", path, &err))?;
    if !metadata.is_file() {
        return Ok(None);
    }
    check_opened(config, &file, &metadata, path)?;
    let mut bytes = Vec::new();
    io::Read::read_to_end(&mut file, &mut bytes).map_err(|err| io_error("read", path, &err))?;
    let content = String::from_utf8(bytes).map_err(|_| {
        ExtensionError::conflict(
            "FileNotText",
            format!(
                "The file '{path}' is not UTF-8 text; the Local extension only manages text files."
            ),
        )
    })?;
    Ok(Some((content, mode_of(&metadata))))
}

/// The error for a path that changed under us into something leading elsewhere.
fn moved_error(path: &RelativePath) -> ExtensionError {
    path_error(
        &PathProblem::EscapesRoot(path.to_string()),
        "/properties/path",
    )
}

#[cfg(unix)]
fn open_no_follow(path: &Path) -> io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags.bits() as i32)
        .open(path)
}

#[cfg(not(unix))]
fn open_no_follow(path: &Path) -> io::Result<std::fs::File> {
    std::fs::File::open(path)
}

#[cfg(unix)]
fn is_symlink_loop(err: &io::Error) -> bool {
    err.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error())
}

#[cfg(not(unix))]
fn is_symlink_loop(_err: &io::Error) -> bool {
    false
}

/// Refuses an opened file that is not where it should be: outside the root or in a denied path (where the
/// system says where it is), or a denied file itself under another name (a hard link).
fn check_opened(
    config: &LocalConfig,
    file: &std::fs::File,
    metadata: &std::fs::Metadata,
    path: &RelativePath,
) -> Result<(), ExtensionError> {
    #[cfg(unix)]
    if let Some(confinement) = config.confinement() {
        use std::os::unix::fs::MetadataExt;
        if confinement.is_denied_identity((metadata.dev(), metadata.ino())) {
            return Err(path_error(
                &PathProblem::Denied(path.to_string()),
                "/properties/path",
            ));
        }
    }
    #[cfg(not(unix))]
    let _ = metadata;
    if let Some(real) = opened_location(file) {
        check_location(config, &real, path)?;
    }
    Ok(())
}

/// Refuses a real (fully resolved) location outside the root or in a denied path.
fn check_location(
    config: &LocalConfig,
    real: &Path,
    path: &RelativePath,
) -> Result<(), ExtensionError> {
    if config.confinement().is_some_and(|c| c.is_denied(real)) {
        return Err(path_error(
            &PathProblem::Denied(path.to_string()),
            "/properties/path",
        ));
    }
    if !real.starts_with(config.root()) {
        return Err(moved_error(path));
    }
    Ok(())
}

/// Checks, right before changing the filesystem at `resolved`, that its parent still lies where resolving
/// found it: a directory swapped for a symbolic link since then would redirect the change.
fn recheck_parent(
    config: &LocalConfig,
    resolved: &Path,
    path: &RelativePath,
) -> Result<(), ExtensionError> {
    let Some(parent) = resolved.parent() else {
        return Ok(());
    };
    match parent.canonicalize() {
        Ok(real) => check_location(config, &real, path),
        // Not there (yet): nothing can redirect through it.
        Err(_) => Ok(()),
    }
}

/// Where an open file really is, when the system can say (Linux's `/proc/self/fd`).
#[cfg(target_os = "linux")]
fn opened_location(file: &std::fs::File) -> Option<PathBuf> {
    use std::os::fd::AsRawFd;
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
}

#[cfg(not(target_os = "linux"))]
fn opened_location(_file: &std::fs::File) -> Option<PathBuf> {
    None
}

/// Writes `content` atomically (temporary file + rename); skips the write when nothing changes.
fn write_file(
    config: &LocalConfig,
    resolved: &Path,
    path: &RelativePath,
    content: &str,
    mode: Option<u32>,
) -> Result<u32, ExtensionError> {
    if std::fs::metadata(resolved).is_ok_and(|m| m.is_dir()) {
        return Err(ExtensionError::conflict(
            "PathIsADirectory",
            format!("'{path}' is a directory; a File cannot replace it."),
        )
        .with_target("/properties/path"));
    }
    let existing = match read_file(config, resolved, path) {
        Ok(existing) => existing,
        // A path that leads out is refused; any other trouble reading is settled by the write.
        Err(err) if matches!(err.code(), "PathOutsideRoot" | "PathDenied") => return Err(err),
        Err(_) => None,
    };
    if let Some((current, current_mode)) = &existing
        && current == content
        && mode.is_none_or(|m| m == *current_mode)
    {
        return Ok(*current_mode);
    }
    let parent = resolved
        .parent()
        .ok_or_else(|| ExtensionError::internal("A file path has no parent."))?;
    recheck_parent(config, resolved, path)?;
    std::fs::create_dir_all(parent).map_err(|err| match err.kind() {
        io::ErrorKind::NotADirectory | io::ErrorKind::AlreadyExists => ExtensionError::conflict(
            "ParentNotDirectory",
            format!("A parent of '{path}' is a file, not a directory."),
        )
        .with_target("/properties/path"),
        _ => io_error("create the parent directories of", path, &err),
    })?;
    let file_name = resolved
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temporary = parent.join(format!(
        ".{file_name}.cairn-{}",
        uuid::Uuid::new_v4().simple()
    ));
    let keep = existing.as_ref().map(|(_, current_mode)| *current_mode);
    let write = || -> Result<u32, ExtensionError> {
        let io = |err: io::Error| io_error("write", path, &err);
        // A new name: never follows a link someone put there.
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temporary)
            .map_err(io)?;
        io::Write::write_all(&mut file, content.as_bytes()).map_err(io)?;
        if let Some(mode) = mode.or(keep) {
            set_mode(&file, mode).map_err(io)?;
        }
        let metadata = file.metadata().map_err(io)?;
        // Where the file landed, and where the rename will put it, must still be inside the root.
        check_opened(config, &file, &metadata, path)?;
        recheck_parent(config, resolved, path)?;
        std::fs::rename(&temporary, resolved).map_err(io)?;
        Ok(mode_of(&metadata))
    };
    write().inspect_err(|_| {
        let _ = std::fs::remove_file(&temporary);
    })
}

fn parse_path(raw: &str, target: &str, validator: &mut Validator) -> Option<RelativePath> {
    validator.absorb(parse_relative_path(raw).map_err(|problem| path_error(&problem, target)))
}

fn parse_file_mode(raw: Option<&str>, validator: &mut Validator) -> Option<u32> {
    let raw = raw?;
    let mode = parse_mode(raw);
    validator.check(
        mode.is_some(),
        "InvalidMode",
        "/properties/mode",
        format!("'{raw}' is not an octal permission string such as \"0644\"."),
    );
    mode
}

fn identifiers_path(identifiers: &PathIdentifiers) -> Result<RelativePath, ExtensionError> {
    parse_relative_path(&identifiers.path)
        .map_err(|problem| path_error(&problem, "/identifiers/path"))
}

/// The `File` resource type.
#[derive(Debug, Clone, Copy, Default)]
pub struct FileHandler;

impl ResourceHandler<LocalConfig> for FileHandler {
    type Properties = FileProperties;
    type Identifiers = PathIdentifiers;

    fn resource_type(&self) -> &str {
        FILE_TYPE
    }

    async fn preview(
        &self,
        input: PreviewInput<LocalConfig>,
    ) -> Result<PreviewOutput, ExtensionError> {
        let mut validator = Validator::new();
        let mut properties = match input.properties.clone() {
            Value::Object(object) => object,
            _ => {
                return Err(ExtensionError::invalid(
                    "InvalidProperties",
                    "/properties",
                    "The properties must be an object.",
                ));
            }
        };
        let raw_path = properties
            .get("path")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let path = if input.is_unevaluated("/properties/path") {
            None
        } else {
            match &raw_path {
                Some(raw) => parse_path(raw, "/properties/path", &mut validator),
                None => {
                    validator.error(
                        "InvalidProperties",
                        "/properties/path",
                        "The File needs a 'path'.",
                    );
                    None
                }
            }
        };
        let mode = if input.is_unevaluated("/properties/mode") {
            None
        } else {
            parse_file_mode(
                properties.get("mode").and_then(Value::as_str),
                &mut validator,
            )
        };
        validator.finish()?;

        let mut metadata = ResourcePreviewMetadata::default();
        if let Some(path) = &path {
            properties.insert("path".into(), Value::String(path.to_string()));
        }
        if !properties.contains_key("content") {
            properties.insert("content".into(), Value::String(String::new()));
        }
        if let Some(mode) = mode {
            properties.insert("mode".into(), Value::String(format_mode(mode)));
        } else if !properties.contains_key("mode") {
            // Without a mode, an existing file keeps its own and a new one gets the process default.
            let current = match (&path, &input.config) {
                (Some(path), Some(config)) => {
                    let (config, path) = (config.clone(), path.clone());
                    blocking(move || {
                        let resolved = resolve_at(&config, &path, "/properties/path")?;
                        read_file(&config, &resolved, &path)
                    })
                    .await?
                }
                _ => None,
            };
            match current {
                Some((_, mode)) => {
                    properties.insert("mode".into(), Value::String(format_mode(mode)));
                }
                None => metadata.calculated = Some(vec!["/properties/mode".into()]),
            }
        } else if let (Some(path), Some(config)) = (&path, &input.config) {
            // Only check that the path stays inside the root.
            resolve_at(config, path, "/properties/path")?;
        }
        Ok(PreviewOutput {
            identifiers: path.map(|p| json!({ "path": p.to_string() })),
            properties: Value::Object(properties),
            metadata,
        })
    }

    async fn create_or_update(
        &self,
        request: Apply<LocalConfig, FileProperties>,
    ) -> Result<Applied<PathIdentifiers, FileProperties>, ExtensionError> {
        let mut validator = Validator::new();
        let path = parse_path(&request.properties.path, "/properties/path", &mut validator);
        let mode = parse_file_mode(request.properties.mode.as_deref(), &mut validator);
        validator.finish()?;
        let Some(path) = path else {
            return Err(ExtensionError::internal("The path was not validated."));
        };
        let config = request.config;
        let content = request.properties.content;
        blocking(move || {
            ensure_root(&config)?;
            let resolved = resolve_at(&config, &path, "/properties/path")?;
            let actual_mode = write_file(&config, &resolved, &path, &content, mode)?;
            let normal = path.to_string();
            Ok(Applied::Resource(ResourceState::new(
                PathIdentifiers {
                    path: normal.clone(),
                },
                FileProperties {
                    path: normal,
                    content,
                    mode: Some(format_mode(actual_mode)),
                },
            )))
        })
        .await
    }

    async fn get(
        &self,
        request: Lookup<LocalConfig, PathIdentifiers>,
    ) -> Result<Option<ResourceState<PathIdentifiers, FileProperties>>, ExtensionError> {
        let path = identifiers_path(&request.identifiers)?;
        let config = request.config;
        blocking(move || {
            let resolved = resolve_at(&config, &path, "/identifiers/path")?;
            Ok(
                read_file(&config, &resolved, &path)?.map(|(content, mode)| {
                    let normal = path.to_string();
                    ResourceState::new(
                        PathIdentifiers {
                            path: normal.clone(),
                        },
                        FileProperties {
                            path: normal,
                            content,
                            mode: Some(format_mode(mode)),
                        },
                    )
                }),
            )
        })
        .await
    }

    async fn delete(
        &self,
        request: Lookup<LocalConfig, PathIdentifiers>,
    ) -> Result<Deleted<PathIdentifiers, FileProperties>, ExtensionError> {
        let path = identifiers_path(&request.identifiers)?;
        let config = request.config;
        blocking(move || {
            let resolved = resolve_at(&config, &path, "/identifiers/path")?;
            match std::fs::symlink_metadata(&resolved) {
                Ok(metadata) if metadata.is_file() => {
                    recheck_parent(&config, &resolved, &path)?;
                    std::fs::remove_file(&resolved)
                        .map_err(|err| io_error("delete", &path, &err))?;
                    Ok(Deleted::Gone)
                }
                // Absent, or not a file: no File resource is there.
                _ => Ok(Deleted::Gone),
            }
        })
        .await
    }
}

/// Most directories a delete walks to find that a directory holds only empty ones.
const EMPTY_TREE_LIMIT: usize = 10_000;

/// Removes `directory` when all it holds is directories holding nothing else (such as the parents a `File`
/// created for itself, left empty once the stack deleted the file): they hold no data, so removing them destroys
/// nothing. Bottom-up with `remove_dir`, which fails on anything that appeared meanwhile; links are not followed (a
/// link is an entry in the way). `false` when anything else is there, a denied path is (on a server), or the tree
/// is bigger than [`EMPTY_TREE_LIMIT`].
fn remove_empty_tree(config: &LocalConfig, directory: &Path) -> bool {
    fn collect(directory: &Path, found: &mut Vec<PathBuf>) -> bool {
        let Ok(entries) = std::fs::read_dir(directory) else {
            return false;
        };
        for entry in entries {
            let Ok(entry) = entry else { return false };
            if !entry.file_type().is_ok_and(|t| t.is_dir()) || found.len() >= EMPTY_TREE_LIMIT {
                return false;
            }
            found.push(entry.path());
            if !collect(&entry.path(), found) {
                return false;
            }
        }
        true
    }
    let mut found = Vec::new();
    if !collect(directory, &mut found) {
        return false;
    }
    // Resolved and walked without following links, these are real paths.
    if let Some(confinement) = config.confinement()
        && found.iter().any(|path| confinement.is_denied(path))
    {
        return false;
    }
    // Deepest first: every directory is empty when its turn comes.
    found.sort_by_key(|path| std::cmp::Reverse(path.components().count()));
    found
        .iter()
        .chain(std::iter::once(&directory.to_path_buf()))
        .all(|path| std::fs::remove_dir(path).is_ok())
}

/// How many entries a directory holds and the first few of their names (sorted, `/` after a directory's), so
/// that an error says what is in the way.
fn entries_in_the_way(directory: &Path) -> (usize, String) {
    const NAMED: usize = 5;
    let mut names: Vec<String> = std::fs::read_dir(directory)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|entry| {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if entry.file_type().is_ok_and(|t| t.is_dir()) {
                        format!("{name}/")
                    } else {
                        name
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let count = names.len();
    let mut named = names.into_iter().take(NAMED).collect::<Vec<_>>().join(", ");
    if count > NAMED {
        named.push_str(&format!(" and {} more", count - NAMED));
    }
    (count, named)
}

/// The `Directory` resource type.
#[derive(Debug, Clone, Copy, Default)]
pub struct DirectoryHandler;

impl ResourceHandler<LocalConfig> for DirectoryHandler {
    type Properties = DirectoryProperties;
    type Identifiers = PathIdentifiers;

    fn resource_type(&self) -> &str {
        DIRECTORY_TYPE
    }

    async fn preview(
        &self,
        input: PreviewInput<LocalConfig>,
    ) -> Result<PreviewOutput, ExtensionError> {
        if input.is_unevaluated("/properties/path") {
            return Ok(PreviewOutput {
                identifiers: None,
                properties: input.properties.clone(),
                metadata: ResourcePreviewMetadata::default(),
            });
        }
        let properties: DirectoryProperties = input.typed_properties()?;
        let path = parse_relative_path(&properties.path)
            .map_err(|problem| path_error(&problem, "/properties/path"))?;
        if let Some(config) = &input.config {
            resolve_at(config, &path, "/properties/path")?;
        }
        let normal = path.to_string();
        Ok(PreviewOutput {
            identifiers: Some(json!({ "path": normal })),
            properties: json!({ "path": normal }),
            metadata: ResourcePreviewMetadata::default(),
        })
    }

    async fn create_or_update(
        &self,
        request: Apply<LocalConfig, DirectoryProperties>,
    ) -> Result<Applied<PathIdentifiers, DirectoryProperties>, ExtensionError> {
        let path = parse_relative_path(&request.properties.path)
            .map_err(|problem| path_error(&problem, "/properties/path"))?;
        let config = request.config;
        blocking(move || {
            ensure_root(&config)?;
            let resolved = resolve_at(&config, &path, "/properties/path")?;
            recheck_parent(&config, &resolved, &path)?;
            std::fs::create_dir_all(&resolved).map_err(|err| match err.kind() {
                io::ErrorKind::AlreadyExists | io::ErrorKind::NotADirectory => ExtensionError::conflict(
                    "PathIsNotADirectory",
                    format!("'{path}' (or one of its parents) is a file; a Directory cannot replace it."),
                )
                .with_target("/properties/path"),
                _ => io_error("create", &path, &err),
            })?;
            let normal = path.to_string();
            Ok(Applied::Resource(ResourceState::new(
                PathIdentifiers { path: normal.clone() },
                DirectoryProperties { path: normal },
            )))
        })
        .await
    }

    async fn get(
        &self,
        request: Lookup<LocalConfig, PathIdentifiers>,
    ) -> Result<Option<ResourceState<PathIdentifiers, DirectoryProperties>>, ExtensionError> {
        let path = identifiers_path(&request.identifiers)?;
        let config = request.config;
        blocking(move || {
            let resolved = resolve_at(&config, &path, "/identifiers/path")?;
            let exists = std::fs::metadata(&resolved).is_ok_and(|m| m.is_dir());
            let normal = path.to_string();
            Ok(exists.then(|| {
                ResourceState::new(
                    PathIdentifiers {
                        path: normal.clone(),
                    },
                    DirectoryProperties { path: normal },
                )
            }))
        })
        .await
    }

    async fn delete(
        &self,
        request: Lookup<LocalConfig, PathIdentifiers>,
    ) -> Result<Deleted<PathIdentifiers, DirectoryProperties>, ExtensionError> {
        let path = identifiers_path(&request.identifiers)?;
        let config = request.config;
        blocking(move || {
            let resolved = resolve_at(&config, &path, "/identifiers/path")?;
            if !std::fs::metadata(&resolved).is_ok_and(|m| m.is_dir()) {
                return Ok(Deleted::Gone);
            }
            recheck_parent(&config, &resolved, &path)?;
            match std::fs::remove_dir(&resolved) {
                Ok(()) => Ok(Deleted::Gone),
                Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(Deleted::Gone),
                Err(err)
                    if err.kind() == io::ErrorKind::DirectoryNotEmpty
                        && remove_empty_tree(&config, &resolved) =>
                {
                    Ok(Deleted::Gone)
                }
                Err(err) if err.kind() == io::ErrorKind::DirectoryNotEmpty => {
                    let (entries, named) = entries_in_the_way(&resolved);
                    Err(ExtensionError::conflict(
                        "DirectoryNotEmpty",
                        format!(
                            "The directory '{path}' still holds {entries} entr{} ({named}); the Local extension only \
                             deletes directories that hold no file. Delete its files first (declare Files inside it with a \
                             dependency on the Directory so they are deleted before it).",
                            if entries == 1 { "y" } else { "ies" }
                        ),
                    )
                    .with_target("/identifiers/path"))
                }
                Err(err) => Err(io_error("delete", &path, &err)),
            }
        })
        .await
    }
}
