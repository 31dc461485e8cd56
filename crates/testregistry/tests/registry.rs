//! The test registry starts, answers the distribution API and enforces basic auth.

use std::io::{Read, Write};
use std::net::TcpStream;

use cairn_testregistry::TestRegistry;

fn get(port: u16, path: &str, authorization: Option<&str>) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let auth = authorization
        .map(|value| format!("Authorization: {value}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

fn basic(user: &str, password: &str) -> String {
    use std::fmt::Write as _;
    // Base64 by hand: the test needs no encoder crate for one header.
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let input = format!("{user}:{password}").into_bytes();
    let mut out = String::new();
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    let mut header = String::new();
    write!(header, "Basic {out}").unwrap();
    header
}

#[test]
fn anonymous_registry_answers_v2() {
    let registry = TestRegistry::start();
    let answer = get(registry.port(), "/v2/", None);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(registry.storage_dir().is_dir());
    let port = registry.port();
    drop(registry);
    assert!(
        TcpStream::connect(("127.0.0.1", port)).is_err(),
        "still listening after drop"
    );
}

#[test]
fn basic_auth_registry_checks_the_password() {
    let registry = TestRegistry::start_with_basic_auth();
    let password = registry.password().unwrap().to_owned();
    let anonymous = get(registry.port(), "/v2/", None);
    assert!(anonymous.starts_with("HTTP/1.1 401"), "{anonymous}");
    assert!(anonymous.contains("Basic realm"), "{anonymous}");
    let wrong = get(
        registry.port(),
        "/v2/",
        Some(&basic(cairn_testregistry::USER, "nope")),
    );
    assert!(wrong.starts_with("HTTP/1.1 401"), "{wrong}");
    let right = get(
        registry.port(),
        "/v2/",
        Some(&basic(cairn_testregistry::USER, &password)),
    );
    assert!(right.starts_with("HTTP/1.1 200"), "{right}");
}
