//! `cairn store`: the store's schema (`migrate`), copying a data directory into PostgreSQL (`copy`) and rotating
//! the master key (`rotate-key`); and where
//! `cairn serve` and these commands find the store (`--store`, `$CAIRN_STORE`, `$CAIRN_HOME`, `~/.cairn`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use cairn_assembly::{AssemblyError, RotatedKey, StoreLocation, copy_store};
use cairn_store::StoreError;
use clap::{Args, Subcommand};

/// An environment variable that is set and not empty.
pub(crate) fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Reads a `--store`/`--data-dir` value: a URL or a directory. Flags are taken as paths by clap and read here, so a
/// bad value's error never repeats it (a store URL may hold a password).
fn parse_flag(flag: PathBuf) -> anyhow::Result<StoreLocation> {
    Ok(match flag.to_str() {
        Some(text) => StoreLocation::parse(text)?,
        None => StoreLocation::data_dir(flag),
    })
}

/// The store a command runs on: `flag` (`--store` or `--data-dir`), else `$CAIRN_STORE`, else `$CAIRN_HOME`, else
/// `~/.cairn`; a PostgreSQL store takes its master key from `key_file` when given (else the environment).
pub(crate) fn resolve_location(
    flag: Option<PathBuf>,
    key_file: Option<PathBuf>,
) -> anyhow::Result<StoreLocation> {
    let location = if let Some(flag) = flag {
        parse_flag(flag)?
    } else if let Some(store) = env("CAIRN_STORE") {
        StoreLocation::parse(&store).context("CAIRN_STORE")?
    } else if let Some(home) = env("CAIRN_HOME") {
        StoreLocation::data_dir(home)
    } else {
        let home = env("HOME").context("set --store, CAIRN_STORE, CAIRN_HOME or HOME")?;
        StoreLocation::data_dir(Path::new(&home).join(".cairn"))
    };
    Ok(location.with_key_file(key_file))
}

#[derive(Subcommand)]
pub(crate) enum StoreCommand {
    /// Apply the schema migrations this cairn has and the store lacks (no master key needed); prints the schema
    /// version before and after. `cairn serve` migrates on start too; run this first to upgrade replicas one by one.
    Migrate(MigrateArgs),
    /// Copy every record of a data directory (the embedded store) into an empty PostgreSQL database: resource
    /// groups, deployments with their journals, secrets (re-encrypted with the target's key), inventory, Key Vault,
    /// stacks, stack what-if results, extension host operations. Leases are not copied. All or nothing.
    Copy(CopyArgs),
    /// Rotate the master key: the data key that encrypts the secrets is rewrapped with a new master key (one row
    /// changes; records are not rewritten) and the old key no longer opens the store. A data directory keyed by its
    /// cairn.key gets a fresh key there (or the key in --new-key-file); a store whose key is given from outside
    /// (CAIRN_STORE_KEY, or any PostgreSQL store) gets the key in --new-key-file, written with a fresh key when the
    /// file does not exist, and every server must then be given that file.
    RotateKey(RotateKeyArgs),
}

#[derive(Args)]
pub(crate) struct RotateKeyArgs {
    /// The store: a data directory or a postgres:// URL [default: $CAIRN_STORE, else $CAIRN_HOME, else ~/.cairn].
    #[arg(long, value_name = "DIR|URL")]
    store: Option<PathBuf>,
    /// The PostgreSQL store's current master key file [default: $CAIRN_STORE_KEY, else $CAIRN_STORE_KEY_FILE].
    #[arg(long, value_name = "FILE")]
    key_file: Option<PathBuf>,
    /// The file holding the new master key, created (mode 0600) with a fresh key when it does not exist.
    #[arg(long, value_name = "FILE")]
    new_key_file: Option<PathBuf>,
}

#[derive(Args)]
pub(crate) struct MigrateArgs {
    /// The store: a data directory or a postgres:// URL [default: $CAIRN_STORE, else $CAIRN_HOME, else ~/.cairn].
    #[arg(long, value_name = "DIR|URL")]
    store: Option<PathBuf>,
}

#[derive(Args)]
pub(crate) struct CopyArgs {
    /// The data directory to copy from (its key from $CAIRN_STORE_KEY, else its cairn.key).
    #[arg(long, value_name = "DIR")]
    from: PathBuf,
    /// The PostgreSQL database to copy into: postgres://user:password@host:port/database.
    #[arg(long, value_name = "URL")]
    to: PathBuf,
    /// The PostgreSQL store's master key file [default: $CAIRN_STORE_KEY, else $CAIRN_STORE_KEY_FILE]. The data
    /// directory's own cairn.key may be reused.
    #[arg(long, value_name = "FILE")]
    to_key_file: Option<PathBuf>,
    /// Replace the records a non-empty target holds (its data key stays).
    #[arg(long)]
    force: bool,
}

pub(crate) fn run(command: StoreCommand) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async {
        match command {
            StoreCommand::Migrate(args) => migrate(args).await,
            StoreCommand::Copy(args) => copy(args).await,
            StoreCommand::RotateKey(args) => rotate_key(args).await,
        }
    })
}

async fn migrate(args: MigrateArgs) -> anyhow::Result<ExitCode> {
    let location = resolve_location(args.store, None)?;
    let migrated = location.migrate().await?;
    if migrated.from == migrated.to {
        println!(
            "the cairn {location} is at schema version {}: nothing to migrate",
            migrated.to
        );
    } else {
        println!(
            "migrated the cairn {location} from schema version {} to {}",
            migrated.from, migrated.to
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn copy(args: CopyArgs) -> anyhow::Result<ExitCode> {
    let from = StoreLocation::data_dir(args.from);
    let to = parse_flag(args.to)?.with_key_file(args.to_key_file);
    let report = match copy_store(&from, &to, args.force).await {
        Ok(report) => report,
        Err(AssemblyError::CopyStore {
            to,
            source: StoreError::Conflict { reason, .. },
        }) => {
            anyhow::bail!(
                "cannot copy into the cairn {to}: {reason}; copy into an empty database, or pass --force to \
                 replace its records"
            )
        }
        Err(error) => return Err(error.into()),
    };
    println!("copied the cairn {from} into the cairn {to}:");
    for (table, count) in &report.tables {
        println!("  {count:>7} {}", table.label);
    }
    println!("  (leases are not copied)");
    Ok(ExitCode::SUCCESS)
}

async fn rotate_key(args: RotateKeyArgs) -> anyhow::Result<ExitCode> {
    let location = resolve_location(args.store, args.key_file)?;
    match location
        .rotate_master_key(args.new_key_file.as_deref())
        .await?
    {
        RotatedKey::KeyFile(path) => println!(
            "rotated the master key of the cairn {location}: the new key is in {}; the old key no longer opens the \
             store",
            path.display()
        ),
        RotatedKey::GiveToServers(path) => println!(
            "rotated the master key of the cairn {location}: the new key is in {}; give it to every server \
             (--store-key-file, CAIRN_STORE_KEY or CAIRN_STORE_KEY_FILE) before restarting them: running servers \
             keep working, a server started with the old key is refused",
            path.display()
        ),
    }
    Ok(ExitCode::SUCCESS)
}
