//! Role passwords as SCRAM-SHA-256 verifiers computed here, so the plaintext never reaches the server
//! (not its logs, `pg_stat_activity` or `pg_stat_statements`); and checking whether a stored verifier
//! already matches a password, so re-applying the same password changes nothing.
//!
//! The format is PostgreSQL's (RFC 5802/7677): `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`,
//! base64, the password prepared with SASLprep (raw bytes when SASLprep rejects it, as PostgreSQL does).

use data_encoding::BASE64;
use hmac::{Hmac, Mac};
use rand::RngCore;
use sha2::{Digest, Sha256};

/// PostgreSQL's default iteration count (`scram_iterations`).
pub const ITERATIONS: u32 = 4096;
const SALT_BYTES: usize = 16;

type HmacSha256 = Hmac<Sha256>;

/// A fresh verifier for `password` with a random salt.
pub fn verifier(password: &str) -> String {
    let mut salt = [0u8; SALT_BYTES];
    rand::rng().fill_bytes(&mut salt);
    verifier_with(password, &salt, ITERATIONS)
}

/// Whether `stored` (a `pg_authid.rolpassword`) is a SCRAM-SHA-256 verifier of `password`.
pub fn matches(stored: &str, password: &str) -> bool {
    let Some((iterations, salt)) = parse(stored) else {
        return false;
    };
    verifier_with(password, &salt, iterations) == stored
}

fn parse(stored: &str) -> Option<(u32, Vec<u8>)> {
    let rest = stored.strip_prefix("SCRAM-SHA-256$")?;
    let (parameters, _keys) = rest.split_once('$')?;
    let (iterations, salt) = parameters.split_once(':')?;
    let iterations = iterations.parse().ok().filter(|n| *n > 0)?;
    Some((iterations, BASE64.decode(salt.as_bytes()).ok()?))
}

fn verifier_with(password: &str, salt: &[u8], iterations: u32) -> String {
    let prepared = stringprep::saslprep(password)
        .map(|prepared| prepared.into_owned())
        .unwrap_or_else(|_| password.to_owned());
    let salted = salted_password(prepared.as_bytes(), salt, iterations);
    let client_key = hmac(&salted, b"Client Key");
    let stored_key = Sha256::digest(client_key);
    let server_key = hmac(&salted, b"Server Key");
    format!(
        "SCRAM-SHA-256${iterations}:{}${}:{}",
        BASE64.encode(salt),
        BASE64.encode(&stored_key),
        BASE64.encode(&server_key)
    )
}

fn hmac(key: &[u8], message: &[u8]) -> [u8; 32] {
    // HMAC accepts keys of any length; `new_from_slice` cannot fail for it.
    let mut mac = HmacSha256::new_from_slice(key).unwrap_or_else(|_| unreachable!());
    mac.update(message);
    mac.finalize().into_bytes().into()
}

/// PBKDF2-HMAC-SHA-256 with one output block (32 bytes, what SCRAM-SHA-256 needs).
fn salted_password(password: &[u8], salt: &[u8], iterations: u32) -> [u8; 32] {
    let mut first = salt.to_vec();
    first.extend_from_slice(&1u32.to_be_bytes());
    let mut block = hmac(password, &first);
    let mut result = block;
    for _ in 1..iterations {
        block = hmac(password, &block);
        for (out, byte) in result.iter_mut().zip(block) {
            *out ^= byte;
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verifier_matches_its_password_only() {
        let stored = verifier("correct horse");
        assert!(stored.starts_with("SCRAM-SHA-256$4096:"));
        assert!(!stored.contains("correct horse"));
        assert!(matches(&stored, "correct horse"));
        assert!(!matches(&stored, "correct horse "));
        assert!(!matches("md5abcdef", "correct horse"));
        assert_ne!(verifier("correct horse"), stored, "salts are random");
    }

    #[test]
    fn pbkdf2_matches_the_rfc_7914_vector() {
        // RFC 7914 section 11: PBKDF2-HMAC-SHA256("passwd", "salt", 1), first 32 bytes.
        let derived = salted_password(b"passwd", b"salt", 1);
        assert_eq!(
            data_encoding::HEXLOWER.encode(&derived),
            "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc"
        );
    }
}
