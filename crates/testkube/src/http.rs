//! The one HTTPS request start-up needs (`GET` as the admin, for `/readyz` and the like), over a plain
//! blocking socket: [`crate::TestKube::start`] is synchronous and is called from async tests too, where
//! a blocking client that runs its own async runtime (reqwest's) would panic.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

use crate::pki::ClusterPki;

/// How long one probe may take before start-up tries again.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// `GET path` on `127.0.0.1:port` with the admin's client certificate, trusting only the cluster CA:
/// the status code and the body (chunked transfer encoding left in place: callers read the status).
pub(crate) fn get(pki: &ClusterPki, port: u16, path: &str) -> std::io::Result<(u16, String)> {
    let config = client_config(pki).map_err(std::io::Error::other)?;
    let server_name = ServerName::IpAddress(Ipv4Addr::LOCALHOST.into());
    let connection =
        ClientConnection::new(Arc::new(config), server_name).map_err(std::io::Error::other)?;
    let socket = TcpStream::connect((Ipv4Addr::LOCALHOST, port))?;
    socket.set_read_timeout(Some(REQUEST_TIMEOUT))?;
    socket.set_write_timeout(Some(REQUEST_TIMEOUT))?;
    let mut stream = StreamOwned::new(connection, socket);
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: application/json\r\n\
         User-Agent: cairn-testkube\r\nConnection: close\r\n\r\n"
    )?;
    stream.flush()?;
    let mut response = Vec::new();
    match stream.read_to_end(&mut response) {
        Ok(_) => {}
        // A peer that closes without TLS close_notify still sent a whole response.
        Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof && !response.is_empty() => {}
        Err(err) => return Err(err),
    }
    parse_response(&response)
}

fn client_config(pki: &ClusterPki) -> Result<ClientConfig, rustls::Error> {
    let mut roots = RootCertStore::empty();
    roots.add(pki.ca.cert_der.clone())?;
    // An explicit provider: the process may have several linked in, or none installed as default.
    ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_client_auth_cert(
            vec![pki.admin.cert_der.clone()],
            pki.admin.private_key_der(),
        )
}

fn parse_response(response: &[u8]) -> std::io::Result<(u16, String)> {
    let text = String::from_utf8_lossy(response);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("not an HTTP response: {head:?}"),
            )
        })?;
    Ok((status, body.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_status_and_body() {
        let (status, body) =
            parse_response(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nok").unwrap();
        assert_eq!((status, body.as_str()), (200, "ok"));
        let (status, body) = parse_response(b"HTTP/1.1 403 Forbidden\r\n\r\n").unwrap();
        assert_eq!((status, body.as_str()), (403, ""));
        assert!(parse_response(b"garbage").is_err());
    }
}
