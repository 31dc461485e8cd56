//! Envelope encryption of secrets at rest: XChaCha20-Poly1305 with a random 24-byte nonce per record, a data key
//! per store wrapped by a master key (from `CAIRN_STORE_KEY` or a 0600 key file), and associated data binding each
//! ciphertext to its table, row and column.
//!
//! Sealed record layout: `[format 0x01][24-byte nonce][ciphertext ‖ 16-byte tag]`. Associated data:
//! `"cairn-store/aad/v1"` followed by the table, row ID and column, each as a 4-byte big-endian length and bytes,
//! so no two different triples encode alike and a ciphertext moved to another row or column no longer opens.

use std::fmt;
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};

use chacha20poly1305::aead::{Aead, Generate, KeyInit, Payload};
use chacha20poly1305::{Key, XChaCha20Poly1305, XNonce};
use secrecy::{ExposeSecret, SecretString};
use zeroize::{Zeroize, Zeroizing};

use crate::error::{StoreError, StoreResult};

/// The environment variable that may hold the master key (standard base64 of 32 bytes). When set it wins over the
/// key file.
pub const KEY_ENV_VAR: &str = "CAIRN_STORE_KEY";
/// The key file inside a data directory, created with mode 0600 when neither it nor the variable exists.
pub const KEY_FILE_NAME: &str = "cairn.key";
/// The environment variable that may name the master key file of a store without a data directory (PostgreSQL).
pub const KEY_FILE_ENV_VAR: &str = "CAIRN_STORE_KEY_FILE";
/// The `store_keys` row holding a store's wrapped data key.
pub const DATA_KEY_ID: &str = "data-key-1";

const KEY_LEN: usize = 32;
const NONCE_LEN: usize = 24;
const TAG_LEN: usize = 16;
const SEALED_FORMAT: u8 = 1;
const AAD_DOMAIN: &[u8] = b"cairn-store/aad/v1";
const STORE_KEYS_TABLE: &str = "store_keys";
const WRAPPED_KEY_COLUMN: &str = "wrapped_key";

/// What a ciphertext is bound to: the table, row ID and column it is stored in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Aad<'a> {
    pub table: &'a str,
    pub row_id: &'a str,
    pub column: &'a str,
}

impl<'a> Aad<'a> {
    pub fn new(table: &'a str, row_id: &'a str, column: &'a str) -> Self {
        Aad {
            table,
            row_id,
            column,
        }
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            AAD_DOMAIN.len() + 12 + self.table.len() + self.row_id.len() + self.column.len(),
        );
        out.extend_from_slice(AAD_DOMAIN);
        for part in [self.table, self.row_id, self.column] {
            let len = u32::try_from(part.len()).unwrap_or(u32::MAX);
            out.extend_from_slice(&len.to_be_bytes());
            out.extend_from_slice(part.as_bytes());
        }
        out
    }
}

/// The key-encryption key: it only wraps the store's data key. Its `Debug` output is redacted and its bytes are
/// wiped on drop.
pub struct MasterKey {
    bytes: Zeroizing<[u8; KEY_LEN]>,
}

impl fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MasterKey([REDACTED])")
    }
}

impl MasterKey {
    /// A fresh random key from the operating system's generator.
    pub fn generate() -> StoreResult<Self> {
        Ok(MasterKey {
            bytes: random_key_bytes()?,
        })
    }

    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> Self {
        MasterKey {
            bytes: Zeroizing::new(bytes),
        }
    }

    /// Parses standard base64 (surrounding whitespace ignored) of exactly 32 bytes.
    pub fn from_base64(text: &str) -> StoreResult<Self> {
        let decoded = Zeroizing::new(
            data_encoding::BASE64
                .decode(text.trim().as_bytes())
                .map_err(|_| StoreError::Crypto("the store key is not valid base64".into()))?,
        );
        let bytes: [u8; KEY_LEN] = decoded.as_slice().try_into().map_err(|_| {
            StoreError::Crypto(format!(
                "the store key must be {KEY_LEN} bytes, found {}",
                decoded.len()
            ))
        })?;
        Ok(MasterKey::from_bytes(bytes))
    }

    /// The key as standard base64, the format of the key file and of `CAIRN_STORE_KEY`.
    pub fn to_base64(&self) -> SecretString {
        SecretString::from(data_encoding::BASE64.encode(self.bytes.as_slice()))
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new(&Key::from(*self.bytes))
    }
}

/// Where the master key came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyOrigin {
    Environment,
    ExistingFile(PathBuf),
    CreatedFile(PathBuf),
}

/// The master key for a data directory: `CAIRN_STORE_KEY` when set, else `<data_dir>/cairn.key`, created (mode
/// 0600) with a fresh key when absent. The directory must exist.
pub fn load_master_key(data_dir: &Path) -> StoreResult<(MasterKey, KeyOrigin)> {
    let from_env = env_master_key()?;
    load_master_key_from(from_env.as_ref(), data_dir)
}

/// The master key of an existing data directory: `CAIRN_STORE_KEY` when set, else `<data_dir>/cairn.key`, which must
/// exist (unlike [`load_master_key`], nothing is created: for reading a store that is already there, e.g. the
/// source of a copy, a new key could only fail to open it).
pub fn load_existing_master_key(data_dir: &Path) -> StoreResult<(MasterKey, KeyOrigin)> {
    let env_key = env_master_key()?;
    load_server_master_key_from(None, env_key.as_ref(), Some(&data_dir.join(KEY_FILE_NAME)))
}

/// `CAIRN_STORE_KEY`, when set.
fn env_master_key() -> StoreResult<Option<SecretString>> {
    match std::env::var(KEY_ENV_VAR) {
        Ok(value) => Ok(Some(SecretString::from(value))),
        Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(StoreError::Crypto(format!(
            "{KEY_ENV_VAR} is not valid base64"
        ))),
    }
}

/// The master key of a store reached over the network (PostgreSQL), which has no data directory to keep a key file
/// in: the key file `key_file` when given (e.g. a command-line flag), else `CAIRN_STORE_KEY`, else the key file
/// named by `CAIRN_STORE_KEY_FILE`. Nothing is created: replicas must share one key, so generating one here would
/// split them; without any of the three this fails with [`StoreError::Crypto`] saying how to give one.
pub fn load_server_master_key(key_file: Option<&Path>) -> StoreResult<(MasterKey, KeyOrigin)> {
    let env_key = env_master_key()?;
    let env_file = std::env::var_os(KEY_FILE_ENV_VAR)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    load_server_master_key_from(key_file, env_key.as_ref(), env_file.as_deref())
}

/// [`load_server_master_key`] with the environment's values passed in.
pub fn load_server_master_key_from(
    key_file: Option<&Path>,
    env_key: Option<&SecretString>,
    env_key_file: Option<&Path>,
) -> StoreResult<(MasterKey, KeyOrigin)> {
    if let Some(path) = key_file {
        return existing_key_file(path);
    }
    if let Some(value) = env_key {
        let key = MasterKey::from_base64(value.expose_secret())
            .map_err(|e| StoreError::Crypto(format!("{KEY_ENV_VAR}: {}", crypto_message(&e))))?;
        return Ok((key, KeyOrigin::Environment));
    }
    if let Some(path) = env_key_file {
        return existing_key_file(path);
    }
    Err(StoreError::Crypto(format!(
        "no master key for the store: it is never kept in the database, so give one with {KEY_ENV_VAR} (standard \
         base64 of 32 random bytes, e.g. `openssl rand -base64 32`) or a key file holding it (mode 0600), named by \
         {KEY_FILE_ENV_VAR} or the command's key-file option"
    )))
}

fn existing_key_file(path: &Path) -> StoreResult<(MasterKey, KeyOrigin)> {
    match read_key_file(path)? {
        Some(key) => Ok((key, KeyOrigin::ExistingFile(path.to_owned()))),
        None => Err(StoreError::Crypto(format!(
            "key file {} does not exist",
            path.display()
        ))),
    }
}

/// [`load_master_key`] with the environment value passed in (tests cannot safely set process variables).
pub fn load_master_key_from(
    env_value: Option<&SecretString>,
    data_dir: &Path,
) -> StoreResult<(MasterKey, KeyOrigin)> {
    if let Some(value) = env_value {
        let key = MasterKey::from_base64(value.expose_secret())
            .map_err(|e| StoreError::Crypto(format!("{KEY_ENV_VAR}: {}", crypto_message(&e))))?;
        return Ok((key, KeyOrigin::Environment));
    }
    let path = data_dir.join(KEY_FILE_NAME);
    match read_key_file(&path)? {
        Some(key) => Ok((key, KeyOrigin::ExistingFile(path))),
        None => {
            let key = MasterKey::generate()?;
            match create_key_file(&path, &key) {
                Ok(()) => Ok((key, KeyOrigin::CreatedFile(path))),
                // Another process created it first: use theirs.
                Err(e) if e.kind() == ErrorKind::AlreadyExists => match read_key_file(&path)? {
                    Some(existing) => Ok((existing, KeyOrigin::ExistingFile(path))),
                    None => Err(StoreError::Crypto(format!(
                        "key file {} vanished while opening",
                        path.display()
                    ))),
                },
                Err(e) => Err(StoreError::Crypto(format!(
                    "cannot create key file {}: {e}",
                    path.display()
                ))),
            }
        }
    }
}

fn crypto_message(error: &StoreError) -> String {
    match error {
        StoreError::Crypto(message) => message.clone(),
        other => other.to_string(),
    }
}

fn read_key_file(path: &Path) -> StoreResult<Option<MasterKey>> {
    let mut file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(StoreError::Crypto(format!(
                "cannot read key file {}: {e}",
                path.display()
            )));
        }
    };
    check_key_file_mode(&file, path)?;
    let mut text = Zeroizing::new(String::new());
    file.read_to_string(&mut text)
        .map_err(|e| StoreError::Crypto(format!("cannot read key file {}: {e}", path.display())))?;
    MasterKey::from_base64(&text).map(Some).map_err(|e| {
        StoreError::Crypto(format!(
            "key file {}: {}",
            path.display(),
            crypto_message(&e)
        ))
    })
}

#[cfg(unix)]
fn check_key_file_mode(file: &std::fs::File, path: &Path) -> StoreResult<()> {
    use std::os::unix::fs::PermissionsExt;
    let mode = file
        .metadata()
        .map_err(|e| {
            StoreError::Crypto(format!("cannot inspect key file {}: {e}", path.display()))
        })?
        .permissions()
        .mode();
    // Like ssh with private keys: a key others can read is treated as compromised rather than used silently.
    if mode & 0o077 != 0 {
        return Err(StoreError::Crypto(format!(
            "key file {} is accessible by other users (mode {:o}); restrict it to 0600",
            path.display(),
            mode & 0o777
        )));
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_key_file_mode(_file: &std::fs::File, _path: &Path) -> StoreResult<()> {
    Ok(())
}

/// Writes `key` to a new key file at `path` (mode 0600 on Unix, synced); an existing file is never overwritten.
pub fn write_key_file(path: &Path, key: &MasterKey) -> StoreResult<()> {
    create_key_file(path, key)
        .map_err(|e| StoreError::Crypto(format!("cannot create key file {}: {e}", path.display())))
}

/// The master key in the key file at `path`, `None` when there is no such file (a file readable by group or others,
/// or not holding a key, is refused).
pub fn read_master_key_file(path: &Path) -> StoreResult<Option<MasterKey>> {
    read_key_file(path)
}

fn create_key_file(path: &Path, key: &MasterKey) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    let mut text = Zeroizing::new(key.to_base64().expose_secret().to_owned());
    text.push('\n');
    file.write_all(text.as_bytes())?;
    file.sync_all()
}

fn random_key_bytes() -> StoreResult<Zeroizing<[u8; KEY_LEN]>> {
    let mut key = Key::try_generate()
        .map_err(|_| StoreError::Crypto("the system random generator failed".into()))?;
    let mut bytes = Zeroizing::new([0u8; KEY_LEN]);
    bytes.copy_from_slice(key.as_slice());
    key.as_mut_slice().zeroize();
    Ok(bytes)
}

/// The store's data key: it encrypts every secret record. It is stored only wrapped by the [`MasterKey`], so the
/// master key can be rotated by rewrapping one row.
pub struct DataKey {
    cipher: XChaCha20Poly1305,
}

impl fmt::Debug for DataKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DataKey([REDACTED])")
    }
}

impl DataKey {
    /// A fresh data key and its wrapped form, to be stored under `key_id`.
    pub fn generate_wrapped(master: &MasterKey, key_id: &str) -> StoreResult<(DataKey, Vec<u8>)> {
        let bytes = random_key_bytes()?;
        let wrapped = seal_with(&master.cipher(), wrap_aad(key_id), bytes.as_slice())?;
        Ok((DataKey::from_bytes(&bytes), wrapped))
    }

    /// Opens a wrapped data key; a different master key fails with [`StoreError::Crypto`].
    pub fn unwrap(master: &MasterKey, key_id: &str, wrapped: &[u8]) -> StoreResult<DataKey> {
        let bytes = unwrap_bytes(master, key_id, wrapped)?;
        Ok(DataKey::from_bytes(&bytes))
    }

    /// Rewraps a wrapped data key under a new master key (master-key rotation); the data key itself is unchanged.
    pub fn rewrap(
        old: &MasterKey,
        new: &MasterKey,
        key_id: &str,
        wrapped: &[u8],
    ) -> StoreResult<Vec<u8>> {
        let bytes = unwrap_bytes(old, key_id, wrapped)?;
        seal_with(&new.cipher(), wrap_aad(key_id), bytes.as_slice())
    }

    fn from_bytes(bytes: &Zeroizing<[u8; KEY_LEN]>) -> DataKey {
        DataKey {
            cipher: XChaCha20Poly1305::new(&Key::from(**bytes)),
        }
    }

    /// Encrypts `plaintext` for the place `aad` names, with a fresh random nonce.
    pub fn seal(&self, aad: Aad<'_>, plaintext: &[u8]) -> StoreResult<Vec<u8>> {
        seal_with(&self.cipher, aad, plaintext)
    }

    /// Decrypts a record sealed for the same place; any other place, key or a changed byte fails.
    pub fn open(&self, aad: Aad<'_>, sealed: &[u8]) -> StoreResult<Zeroizing<Vec<u8>>> {
        open_with(&self.cipher, aad, sealed)
    }

    pub fn seal_secret(&self, aad: Aad<'_>, secret: &SecretString) -> StoreResult<Vec<u8>> {
        self.seal(aad, secret.expose_secret().as_bytes())
    }

    pub fn open_secret(&self, aad: Aad<'_>, sealed: &[u8]) -> StoreResult<SecretString> {
        let mut bytes = self.open(aad, sealed)?;
        let text = String::from_utf8(std::mem::take(&mut *bytes)).map_err(|e| {
            let mut raw = e.into_bytes();
            raw.zeroize();
            StoreError::Crypto("a decrypted secret is not UTF-8".into())
        })?;
        Ok(SecretString::from(text))
    }
}

fn wrap_aad(key_id: &str) -> Aad<'_> {
    Aad::new(STORE_KEYS_TABLE, key_id, WRAPPED_KEY_COLUMN)
}

fn unwrap_bytes(
    master: &MasterKey,
    key_id: &str,
    wrapped: &[u8],
) -> StoreResult<Zeroizing<[u8; KEY_LEN]>> {
    let opened = open_with(&master.cipher(), wrap_aad(key_id), wrapped).map_err(|_| {
        StoreError::Crypto(
            "the master key does not match the key this store was created with".into(),
        )
    })?;
    let mut bytes = Zeroizing::new([0u8; KEY_LEN]);
    if opened.len() != KEY_LEN {
        return Err(StoreError::Crypto(
            "the wrapped data key has the wrong length".into(),
        ));
    }
    bytes.copy_from_slice(&opened);
    Ok(bytes)
}

fn seal_with(cipher: &XChaCha20Poly1305, aad: Aad<'_>, plaintext: &[u8]) -> StoreResult<Vec<u8>> {
    let nonce = XNonce::try_generate()
        .map_err(|_| StoreError::Crypto("the system random generator failed".into()))?;
    let aad_bytes = aad.encode();
    let ciphertext = cipher
        .encrypt(
            &nonce,
            Payload {
                msg: plaintext,
                aad: &aad_bytes,
            },
        )
        .map_err(|_| StoreError::Crypto("encryption failed".into()))?;
    let mut sealed = Vec::with_capacity(1 + NONCE_LEN + ciphertext.len());
    sealed.push(SEALED_FORMAT);
    sealed.extend_from_slice(nonce.as_slice());
    sealed.extend_from_slice(&ciphertext);
    Ok(sealed)
}

fn open_with(
    cipher: &XChaCha20Poly1305,
    aad: Aad<'_>,
    sealed: &[u8],
) -> StoreResult<Zeroizing<Vec<u8>>> {
    let (format, rest) = sealed
        .split_first()
        .ok_or_else(|| StoreError::Crypto("a sealed record is empty".into()))?;
    if *format != SEALED_FORMAT {
        return Err(StoreError::Crypto(format!(
            "unknown sealed record format {format}"
        )));
    }
    if rest.len() < NONCE_LEN + TAG_LEN {
        return Err(StoreError::Crypto("a sealed record is truncated".into()));
    }
    let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
    let nonce = XNonce::try_from(nonce)
        .map_err(|_| StoreError::Crypto("a sealed record is truncated".into()))?;
    let aad_bytes = aad.encode();
    cipher
        .decrypt(
            &nonce,
            Payload {
                msg: ciphertext,
                aad: &aad_bytes,
            },
        )
        .map(Zeroizing::new)
        .map_err(|_| {
            StoreError::Crypto(format!(
                "cannot decrypt {}.{} of row '{}': wrong key or tampered data",
                aad.table, aad.column, aad.row_id
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data_key() -> DataKey {
        let master = MasterKey::generate().expect("random");
        DataKey::generate_wrapped(&master, "k1").expect("wrap").0
    }

    #[test]
    fn seal_then_open_round_trips() {
        let key = data_key();
        let aad = Aad::new("secrets", "r1", "value");
        let sealed = key.seal(aad, b"hunter2").expect("seal");
        assert_eq!(sealed.len(), 1 + NONCE_LEN + 7 + TAG_LEN);
        assert_eq!(key.open(aad, &sealed).expect("open").as_slice(), b"hunter2");
    }

    #[test]
    fn nonces_differ_per_record() {
        let key = data_key();
        let aad = Aad::new("secrets", "r1", "value");
        assert_ne!(
            key.seal(aad, b"x").expect("seal"),
            key.seal(aad, b"x").expect("seal")
        );
    }

    #[test]
    fn a_ciphertext_only_opens_in_its_own_place() {
        let key = data_key();
        let sealed = key
            .seal(Aad::new("secrets", "r1", "value"), b"v")
            .expect("seal");
        for other in [
            Aad::new("secrets", "r2", "value"),
            Aad::new("secretz", "r1", "value"),
            Aad::new("secrets", "r1", "other"),
        ] {
            assert!(matches!(
                key.open(other, &sealed),
                Err(StoreError::Crypto(_))
            ));
        }
    }

    #[test]
    fn aad_parts_cannot_be_shifted() {
        assert_ne!(
            Aad::new("ab", "c", "d").encode(),
            Aad::new("a", "bc", "d").encode()
        );
    }

    #[test]
    fn every_flipped_byte_is_detected() {
        let key = data_key();
        let aad = Aad::new("t", "r", "c");
        let sealed = key.seal(aad, b"secret value").expect("seal");
        for index in 0..sealed.len() {
            let mut tampered = sealed.clone();
            tampered[index] ^= 0x01;
            assert!(
                matches!(key.open(aad, &tampered), Err(StoreError::Crypto(_))),
                "byte {index}"
            );
        }
        assert!(key.open(aad, &sealed[..sealed.len() - 1]).is_err());
        assert!(key.open(aad, &[]).is_err());
    }

    #[test]
    fn wrong_master_key_cannot_unwrap() {
        let master = MasterKey::generate().expect("random");
        let (_, wrapped) = DataKey::generate_wrapped(&master, "k1").expect("wrap");
        let other = MasterKey::generate().expect("random");
        assert!(matches!(
            DataKey::unwrap(&other, "k1", &wrapped),
            Err(StoreError::Crypto(_))
        ));
        assert!(DataKey::unwrap(&master, "k2", &wrapped).is_err());
        assert!(DataKey::unwrap(&master, "k1", &wrapped).is_ok());
    }

    #[test]
    fn rewrapped_keys_open_old_records() {
        let old = MasterKey::generate().expect("random");
        let (key, wrapped) = DataKey::generate_wrapped(&old, "k1").expect("wrap");
        let aad = Aad::new("t", "r", "c");
        let sealed = key.seal(aad, b"v").expect("seal");
        let new = MasterKey::generate().expect("random");
        let rewrapped = DataKey::rewrap(&old, &new, "k1", &wrapped).expect("rewrap");
        let reopened = DataKey::unwrap(&new, "k1", &rewrapped).expect("unwrap");
        assert_eq!(reopened.open(aad, &sealed).expect("open").as_slice(), b"v");
        assert!(DataKey::unwrap(&old, "k1", &rewrapped).is_err());
    }

    #[test]
    fn debug_output_is_redacted() {
        let master = MasterKey::from_bytes([7; 32]);
        assert_eq!(format!("{master:?}"), "MasterKey([REDACTED])");
        assert_eq!(format!("{:?}", data_key()), "DataKey([REDACTED])");
    }

    #[test]
    fn base64_keys_round_trip_and_reject_bad_lengths() {
        let master = MasterKey::from_bytes([9; 32]);
        let text = master.to_base64();
        let parsed = MasterKey::from_base64(text.expose_secret()).expect("parse");
        assert_eq!(*parsed.bytes, [9; 32]);
        assert!(matches!(
            MasterKey::from_base64("AAAA"),
            Err(StoreError::Crypto(_))
        ));
        assert!(matches!(
            MasterKey::from_base64("not base64!"),
            Err(StoreError::Crypto(_))
        ));
    }

    #[test]
    fn key_file_is_created_0600_and_reused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (first, origin) = load_master_key_from(None, dir.path()).expect("create");
        let path = dir.path().join(KEY_FILE_NAME);
        assert_eq!(origin, KeyOrigin::CreatedFile(path.clone()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path)
                .expect("metadata")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let (second, origin) = load_master_key_from(None, dir.path()).expect("reuse");
        assert_eq!(origin, KeyOrigin::ExistingFile(path));
        assert_eq!(*first.bytes, *second.bytes);
    }

    #[cfg(unix)]
    #[test]
    fn key_file_readable_by_others_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        load_master_key_from(None, dir.path()).expect("create");
        let path = dir.path().join(KEY_FILE_NAME);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        assert!(matches!(
            load_master_key_from(None, dir.path()),
            Err(StoreError::Crypto(_))
        ));
    }

    #[test]
    fn a_server_store_key_comes_from_a_flag_the_environment_or_a_named_file_and_is_never_made_up() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("server.key");
        let missing = dir.path().join("missing.key");
        let env = MasterKey::from_bytes([5; 32]).to_base64();

        let error = load_server_master_key_from(None, None, None).expect_err("no key");
        let message = error.to_string();
        assert!(
            message.contains(KEY_ENV_VAR) && message.contains(KEY_FILE_ENV_VAR),
            "{message}"
        );
        assert!(
            load_server_master_key_from(Some(&missing), Some(&env), None).is_err(),
            "a key file given explicitly must exist"
        );
        assert!(!missing.exists(), "nothing is created");

        let (created, _) = load_master_key_from(None, dir.path()).expect("a key file");
        std::fs::rename(dir.path().join(KEY_FILE_NAME), &file).expect("rename");
        let (from_flag, origin) =
            load_server_master_key_from(Some(&file), Some(&env), None).expect("flag");
        assert_eq!(origin, KeyOrigin::ExistingFile(file.clone()));
        assert_eq!(
            *from_flag.bytes, *created.bytes,
            "the flag wins over the variable"
        );
        let (from_env, origin) =
            load_server_master_key_from(None, Some(&env), Some(&file)).expect("env");
        assert_eq!((origin, *from_env.bytes), (KeyOrigin::Environment, [5; 32]));
        let (from_env_file, _) =
            load_server_master_key_from(None, None, Some(&file)).expect("env file");
        assert_eq!(*from_env_file.bytes, *created.bytes);
    }

    #[test]
    fn environment_key_wins_and_creates_no_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let env = MasterKey::from_bytes([3; 32]).to_base64();
        let (key, origin) = load_master_key_from(Some(&env), dir.path()).expect("env");
        assert_eq!(origin, KeyOrigin::Environment);
        assert_eq!(*key.bytes, [3; 32]);
        assert!(!dir.path().join(KEY_FILE_NAME).exists());
        let bad = SecretString::from("short".to_owned());
        let error = load_master_key_from(Some(&bad), dir.path()).expect_err("bad env key");
        assert!(error.to_string().contains(KEY_ENV_VAR));
    }
}
