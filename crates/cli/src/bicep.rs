//! Bicep sources: `-f main.bicep` and `-p main.bicepparam` compiled to ARM JSON by the Bicep CLI as az compiles
//! them (`bicep build FILE --stdout`, `bicep build-params FILE --stdout [--bicep-file TEMPLATE]` with `name=value`
//! overrides in `BICEP_PARAMETERS_OVERRIDES`), or by `az bicep` when only the Azure CLI is on PATH. The compiled
//! JSON then goes the way a JSON file goes; the compiler's warnings are passed on to stderr.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use cairn_template::SourceFile;
use serde_json::{Map, Value};

/// Why a Bicep source could not be compiled. Messages name the file and what to do, never a parameter value.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BicepError {
    #[error(
        "{file} is Bicep source, and neither the Bicep CLI (`bicep`) nor the Azure CLI (`az`) is on PATH to \
         compile it: install the Bicep CLI, or the Azure CLI and then `az bicep install`; or compile it \
         elsewhere (`bicep {verb} {file}`) and pass the JSON file"
    )]
    NotInstalled { file: String, verb: &'static str },
    #[error("cannot run `{program}` to compile {file}: {reason}")]
    Spawn {
        program: String,
        file: String,
        reason: String,
    },
    /// The compiler's own messages were passed on to stderr.
    #[error("`{command}` could not compile {file} (exit code {code}); its messages are above")]
    Failed {
        command: String,
        file: String,
        code: String,
    },
    #[error("`{command}` did not print what cairn expects for {file}: {reason}")]
    Output {
        command: String,
        file: String,
        reason: String,
    },
}

/// `.bicep`.
pub(crate) fn is_bicep(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("bicep"))
}

/// `.bicepparam`.
pub(crate) fn is_bicepparam(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("bicepparam"))
}

/// The compiler found on PATH: the Bicep CLI first, as az prefers its own install of it.
enum Compiler {
    Bicep(PathBuf),
    Az(PathBuf),
}

impl Compiler {
    fn find() -> Option<Compiler> {
        find_program("bicep")
            .map(Compiler::Bicep)
            .or_else(|| find_program("az").map(Compiler::Az))
    }

    /// The command for `verb` (`build`, `build-params`) on `file`, in the syntax of this compiler.
    fn command(&self, verb: &str, file: &Path) -> (Command, String) {
        match self {
            Compiler::Bicep(program) => {
                let mut command = Command::new(program);
                command.arg(verb).arg(file).arg("--stdout");
                (command, format!("bicep {verb}"))
            }
            Compiler::Az(program) => {
                let mut command = Command::new(program);
                command
                    .args(["bicep", verb, "--file"])
                    .arg(file)
                    .arg("--stdout");
                (command, format!("az bicep {verb}"))
            }
        }
    }
}

/// The first executable `name` on PATH (on Windows also `name.exe`, `name.cmd`, `name.bat`).
fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    let names: Vec<OsString> = if cfg!(windows) {
        ["exe", "cmd", "bat"]
            .iter()
            .map(|ext| OsString::from(format!("{name}.{ext}")))
            .collect()
    } else {
        vec![OsString::from(name)]
    };
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
        .find(|candidate| is_executable(candidate))
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}

/// Runs `command`, passes its stderr (warnings, or the errors of a failed compile) on, and returns its stdout.
fn run(mut command: Command, described: &str, file: &Path) -> Result<String, BicepError> {
    let program = command.get_program().to_string_lossy().into_owned();
    let output = command.output().map_err(|e| BicepError::Spawn {
        program,
        file: file.display().to_string(),
        reason: e.to_string(),
    })?;
    let messages = String::from_utf8_lossy(&output.stderr);
    if !messages.trim().is_empty() {
        eprintln!("{}", messages.trim_end());
    }
    if !output.status.success() {
        return Err(BicepError::Failed {
            command: described.to_string(),
            file: file.display().to_string(),
            code: output
                .status
                .code()
                .map_or_else(|| "none".to_string(), |c| c.to_string()),
        });
    }
    String::from_utf8(output.stdout).map_err(|_| BicepError::Output {
        command: described.to_string(),
        file: file.display().to_string(),
        reason: "the output is not UTF-8".to_string(),
    })
}

fn compiler_for(file: &Path, verb: &'static str) -> Result<Compiler, BicepError> {
    Compiler::find().ok_or_else(|| BicepError::NotInstalled {
        file: file.display().to_string(),
        verb,
    })
}

/// The name compiled JSON is shown under in diagnostics.
fn compiled_name(file: &Path) -> String {
    format!("{} (compiled)", file.display())
}

/// `bicep build FILE --stdout`: the ARM JSON template, as a source to parse like a JSON file.
pub(crate) fn compile_template(file: &Path) -> Result<SourceFile, BicepError> {
    let compiler = compiler_for(file, "build")?;
    let (command, described) = compiler.command("build", file);
    let text = run(command, &described, file)?;
    Ok(SourceFile::new(compiled_name(file), text))
}

/// A `.bicepparam` compiled: the parameters file, and the template it is `using` (its JSON, or a template spec
/// version ID) when the compiler gives it.
#[derive(Debug)]
pub(crate) struct CompiledParameters {
    pub(crate) parameters: SourceFile,
    pub(crate) template: Option<SourceFile>,
    pub(crate) template_spec_id: Option<String>,
}

/// `bicep build-params FILE --stdout [--bicep-file TEMPLATE]` with `overrides` (parameter name to value) in
/// `BICEP_PARAMETERS_OVERRIDES`, as az runs it. `az bicep build-params` takes no `--bicep-file`: the caller then
/// compiles the template itself.
pub(crate) fn compile_parameters(
    file: &Path,
    bicep_file: Option<&Path>,
    overrides: &Map<String, Value>,
) -> Result<CompiledParameters, BicepError> {
    let compiler = compiler_for(file, "build-params")?;
    let (mut command, described) = compiler.command("build-params", file);
    if let (Compiler::Bicep(_), Some(template)) = (&compiler, bicep_file) {
        command.arg("--bicep-file").arg(template);
    }
    if !overrides.is_empty() {
        command.env(
            "BICEP_PARAMETERS_OVERRIDES",
            Value::Object(overrides.clone()).to_string(),
        );
    }
    let text = run(command, &described, file)?;
    let output_error = |reason: &str| BicepError::Output {
        command: described.clone(),
        file: file.display().to_string(),
        reason: reason.to_string(),
    };
    let compiled: Value =
        serde_json::from_str(&text).map_err(|e| output_error(&format!("not JSON ({e})")))?;
    let text_of = |key: &str| {
        compiled
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let parameters =
        text_of("parametersJson").ok_or_else(|| output_error("no `parametersJson` string"))?;
    Ok(CompiledParameters {
        parameters: SourceFile::new(compiled_name(file), parameters),
        template: text_of("templateJson")
            .map(|t| SourceFile::new(format!("{} (compiled template)", file.display()), t)),
        template_spec_id: text_of("templateSpecId"),
    })
}
