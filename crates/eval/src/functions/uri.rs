//! URIs for `uri`, `uriComponent`, `uriComponentToString`, `parseUri` and `buildUri`: RFC 3986 parsing and
//! reference resolution with the normalisation .NET's `System.Uri` applies to `AbsoluteUri` (lower-case scheme and
//! host, default port dropped, dot segments removed, characters outside the URI syntax percent-encoded as UTF-8),
//! plus `Uri.EscapeDataString` and `HttpUtility.UrlDecode`.

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum UriError {
    Empty,
    Format,
    Hostname,
    Port,
}

impl fmt::Display for UriError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The texts of .NET's UriFormatException; the URI itself is not repeated (it may carry a secret token).
        f.write_str(match self {
            UriError::Empty => "Invalid URI: The URI is empty.",
            UriError::Format => "Invalid URI: The format of the URI could not be determined.",
            UriError::Hostname => "Invalid URI: The hostname could not be parsed.",
            UriError::Port => "Invalid URI: Invalid port specified.",
        })
    }
}

impl std::error::Error for UriError {}

/// An absolute URI split into its RFC 3986 components (scheme and host already lower-cased).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Uri {
    pub scheme: String,
    pub authority: Option<Authority>,
    pub path: String,
    pub query: Option<String>,
    pub fragment: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Authority {
    pub userinfo: Option<String>,
    pub host: String,
    pub port: Option<u16>,
}

/// The parts of a reference before resolution.
struct Reference {
    authority: Option<String>,
    path: String,
    query: Option<String>,
    fragment: Option<String>,
}

/// Schemes .NET knows, with their default ports (`None`: no port). Their paths get backslashes turned into slashes.
fn known_scheme(scheme: &str) -> Option<Option<u16>> {
    Some(match scheme {
        "http" | "ws" => Some(80),
        "https" | "wss" => Some(443),
        "ftp" => Some(21),
        "telnet" => Some(23),
        "gopher" => Some(70),
        "ldap" => Some(389),
        "nntp" => Some(119),
        "mailto" => Some(25),
        "net.tcp" => Some(808),
        "file" | "news" | "net.pipe" | "uuid" => None,
        _ => return None,
    })
}

/// Schemes whose URIs must name a host.
fn needs_host(scheme: &str) -> bool {
    matches!(
        scheme,
        "http" | "https" | "ws" | "wss" | "ftp" | "telnet" | "gopher" | "ldap" | "nntp" | "net.tcp"
    )
}

/// `scheme:` at the start of `text`, when `text` is an absolute URI.
fn split_scheme(text: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = text.split_once(':')?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    let valid = first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then_some((scheme, rest))
}

fn split_reference(text: &str, convert_backslashes: bool) -> Reference {
    let (before_fragment, fragment) = match text.split_once('#') {
        Some((a, f)) => (a, Some(f.to_string())),
        None => (text, None),
    };
    let (hierarchy, query) = match before_fragment.split_once('?') {
        Some((h, q)) => (h, Some(q.to_string())),
        None => (before_fragment, None),
    };
    let hierarchy = if convert_backslashes {
        hierarchy.replace('\\', "/")
    } else {
        hierarchy.to_string()
    };
    match hierarchy.strip_prefix("//") {
        Some(after) => {
            let end = after.find('/').unwrap_or(after.len());
            Reference {
                authority: Some(after[..end].to_string()),
                path: after[end..].to_string(),
                query,
                fragment,
            }
        }
        None => Reference {
            authority: None,
            path: hierarchy,
            query,
            fragment,
        },
    }
}

fn parse_authority(text: &str, scheme: &str) -> Result<Authority, UriError> {
    let (userinfo, host_port) = match text.rfind('@') {
        Some(i) => (Some(text[..i].to_string()), &text[i + 1..]),
        None => (None, text),
    };
    let (host, port_text) = if host_port.starts_with('[') {
        let close = host_port.find(']').ok_or(UriError::Hostname)?;
        let after = &host_port[close + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => Some(p),
            None if after.is_empty() => None,
            None => return Err(UriError::Hostname),
        };
        (&host_port[..=close], port)
    } else {
        match host_port.rfind(':') {
            Some(i) => (&host_port[..i], Some(&host_port[i + 1..])),
            None => (host_port, None),
        }
    };
    let port = match port_text {
        None | Some("") => None,
        Some(p) if p.chars().all(|c| c.is_ascii_digit()) => {
            Some(p.parse::<u16>().map_err(|_| UriError::Port)?)
        }
        Some(_) => return Err(UriError::Port),
    };
    let invalid_host_char = |c: char| {
        c.is_whitespace()
            || c.is_control()
            || matches!(
                c,
                '<' | '>' | '"' | '{' | '}' | '|' | '\\' | '^' | '`' | '/' | '?' | '#' | '%' | '@'
            )
    };
    if host.chars().any(invalid_host_char) || (host.is_empty() && needs_host(scheme)) {
        return Err(UriError::Hostname);
    }
    Ok(Authority {
        userinfo,
        host: host.to_ascii_lowercase(),
        port,
    })
}

impl Uri {
    /// Parses an absolute URI as `new Uri(text, UriKind.Absolute)` does (surrounding whitespace ignored).
    pub(super) fn parse_absolute(text: &str) -> Result<Uri, UriError> {
        let text = text.trim_matches(|c: char| c.is_whitespace() || c.is_control());
        if text.is_empty() {
            return Err(UriError::Empty);
        }
        let (scheme, rest) = split_scheme(text).ok_or(UriError::Format)?;
        let scheme = scheme.to_ascii_lowercase();
        let reference = split_reference(rest, known_scheme(&scheme).is_some());
        let authority = match &reference.authority {
            Some(a) => Some(parse_authority(a, &scheme)?),
            None if needs_host(&scheme) => return Err(UriError::Hostname),
            None => None,
        };
        let path = if authority.is_some() || reference.path.starts_with('/') {
            remove_dot_segments(&reference.path)
        } else {
            reference.path
        };
        Ok(Uri {
            scheme,
            authority,
            path,
            query: reference.query,
            fragment: reference.fragment,
        })
    }

    /// `new Uri(this, relative)`: RFC 3986 §5.2 reference resolution.
    pub(super) fn resolve(&self, relative: &str) -> Result<Uri, UriError> {
        let relative = relative.trim_matches(|c: char| c.is_whitespace() || c.is_control());
        if split_scheme(relative).is_some() {
            return Uri::parse_absolute(relative);
        }
        let r = split_reference(relative, known_scheme(&self.scheme).is_some());
        let mut target = Uri {
            scheme: self.scheme.clone(),
            authority: self.authority.clone(),
            path: String::new(),
            query: r.query.clone(),
            fragment: r.fragment,
        };
        if let Some(authority) = &r.authority {
            target.authority = Some(parse_authority(authority, &self.scheme)?);
            target.path = remove_dot_segments(&r.path);
        } else if r.path.is_empty() {
            target.path = self.path.clone();
            if r.query.is_none() {
                target.query = self.query.clone();
            }
        } else if r.path.starts_with('/') {
            target.path = remove_dot_segments(&r.path);
        } else {
            target.path = remove_dot_segments(&self.merge(&r.path));
        }
        Ok(target)
    }

    /// RFC 3986 §5.2.3: the base path up to its last `/`, then the relative path.
    fn merge(&self, relative_path: &str) -> String {
        if self.authority.is_some() && self.path.is_empty() {
            return format!("/{relative_path}");
        }
        match self.path.rfind('/') {
            Some(i) => format!("{}{relative_path}", &self.path[..=i]),
            None => relative_path.to_string(),
        }
    }

    fn default_port(&self) -> Option<u16> {
        known_scheme(&self.scheme).flatten()
    }

    /// `Uri.Host`: empty when the URI has no authority.
    pub(super) fn host(&self) -> &str {
        self.authority.as_ref().map_or("", |a| a.host.as_str())
    }

    /// `Uri.Port`: the explicit port, else the scheme's default, else -1.
    pub(super) fn port(&self) -> i64 {
        self.authority
            .as_ref()
            .and_then(|a| a.port)
            .or_else(|| self.default_port())
            .map_or(-1, i64::from)
    }

    /// `Uri.AbsolutePath`: the escaped path, `/` for an empty path under an authority.
    pub(super) fn absolute_path(&self) -> String {
        if self.authority.is_some() && self.path.is_empty() {
            "/".to_string()
        } else {
            escape_uri_part(&self.path, "")
        }
    }

    /// `Uri.Query`: `?` and the escaped query, or empty.
    pub(super) fn query_text(&self) -> String {
        match &self.query {
            Some(q) if !q.is_empty() => format!("?{}", escape_uri_part(q, "?")),
            _ => String::new(),
        }
    }

    /// `Uri.AbsoluteUri`.
    pub(super) fn to_absolute_string(&self) -> String {
        let mut out = format!("{}:", self.scheme);
        if let Some(authority) = &self.authority {
            out.push_str("//");
            if let Some(userinfo) = &authority.userinfo {
                out.push_str(&escape_uri_part(userinfo, ""));
                out.push('@');
            }
            out.push_str(&authority.host);
            if let Some(port) = authority.port
                && Some(port) != self.default_port()
            {
                out.push_str(&format!(":{port}"));
            }
        }
        out.push_str(&self.absolute_path());
        if let Some(query) = &self.query {
            out.push('?');
            out.push_str(&escape_uri_part(query, "?"));
        }
        if let Some(fragment) = &self.fragment {
            out.push('#');
            out.push_str(&escape_uri_part(fragment, "?"));
        }
        out
    }
}

/// RFC 3986 §5.2.4.
fn remove_dot_segments(path: &str) -> String {
    let mut input = path;
    let mut output = String::with_capacity(path.len());
    let drop_last_segment = |output: &mut String| {
        let cut = output.rfind('/').unwrap_or(0);
        output.truncate(cut);
    };
    while !input.is_empty() {
        if let Some(rest) = input.strip_prefix("../") {
            input = rest;
        } else if let Some(rest) = input.strip_prefix("./") {
            input = rest;
        } else if input.starts_with("/./") {
            input = &input[2..];
        } else if input == "/." {
            input = "/";
        } else if input.starts_with("/../") {
            input = &input[3..];
            drop_last_segment(&mut output);
        } else if input == "/.." {
            input = "/";
            drop_last_segment(&mut output);
        } else if input == "." || input == ".." {
            input = "";
        } else {
            let start = usize::from(input.starts_with('/'));
            let end = input[start..].find('/').map_or(input.len(), |i| i + start);
            output.push_str(&input[..end]);
            input = &input[end..];
        }
    }
    output
}

/// Percent-encodes (as UTF-8, upper-case hex) every character the URI syntax does not allow in a path, keeping
/// existing `%XX` escapes; `extra` lists further characters to keep (`?` in queries).
fn escape_uri_part(text: &str, extra: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    for (i, c) in text.char_indices() {
        let keep = c.is_ascii_alphanumeric()
            || "-._~!$&'()*+,;=:@/".contains(c)
            || extra.contains(c)
            || (c == '%'
                && bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit));
        if keep {
            out.push(c);
        } else {
            push_percent_encoded(c, &mut out);
        }
    }
    out
}

fn push_percent_encoded(c: char, out: &mut String) {
    let mut buf = [0u8; 4];
    for b in c.encode_utf8(&mut buf).bytes() {
        out.push_str(&format!("%{b:02X}"));
    }
}

/// `Uri.EscapeDataString`: everything except the RFC 3986 unreserved characters is percent-encoded.
pub(super) fn escape_data_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '~') {
            out.push(c);
        } else {
            push_percent_encoded(c, &mut out);
        }
    }
    out
}

/// `HttpUtility.UrlDecode(text, Encoding.UTF8)`: `+` is a space, `%XX` a byte, `%uXXXX` a UTF-16 unit; malformed
/// escapes stay as written and invalid UTF-8 becomes U+FFFD.
pub(super) fn url_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut units: Vec<u16> = Vec::with_capacity(text.len());
    let mut pending: Vec<u8> = Vec::new();
    let flush = |pending: &mut Vec<u8>, units: &mut Vec<u16>| {
        if !pending.is_empty() {
            units.extend(String::from_utf8_lossy(pending).encode_utf16());
            pending.clear();
        }
    };
    let hex = |i: usize, n: usize| -> Option<u32> {
        let digits = text.get(i..i + n)?;
        if digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            u32::from_str_radix(digits, 16).ok()
        } else {
            None
        }
    };
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => {
                pending.push(b' ');
                i += 1;
            }
            b'%' if matches!(bytes.get(i + 1), Some(b'u' | b'U')) && hex(i + 2, 4).is_some() => {
                flush(&mut pending, &mut units);
                units.push(hex(i + 2, 4).unwrap_or(0) as u16);
                i += 6;
            }
            b'%' if hex(i + 1, 2).is_some() => {
                pending.push(hex(i + 1, 2).unwrap_or(0) as u8);
                i += 3;
            }
            b => {
                pending.push(b);
                i += 1;
            }
        }
    }
    flush(&mut pending, &mut units);
    String::from_utf16_lossy(&units)
}

/// `UriBuilder { Scheme, Host, Port, Path, Query }.Uri.AbsoluteUri`: the path gets a leading `/`, the query a
/// leading `?`; `?` and `#` inside the path and `#` inside the query are escaped so they stay where they were put.
pub(super) fn build(
    scheme: &str,
    host: &str,
    port: Option<i64>,
    path: &str,
    query: &str,
) -> Result<String, UriError> {
    if split_scheme(&format!("{scheme}:")).is_none_or(|(s, _)| s != scheme) {
        return Err(UriError::Format);
    }
    if host.is_empty() {
        return Err(UriError::Hostname);
    }
    let port = match port {
        None | Some(-1) => None,
        Some(p) => Some(u16::try_from(p).map_err(|_| UriError::Port)?),
    };
    let mut text = format!("{scheme}://");
    if host.contains(':') && !host.starts_with('[') {
        text.push_str(&format!("[{host}]"));
    } else {
        text.push_str(host);
    }
    if let Some(port) = port {
        text.push_str(&format!(":{port}"));
    }
    if !path.starts_with('/') {
        text.push('/');
    }
    text.push_str(&path.replace('?', "%3F").replace('#', "%23"));
    let query = query.strip_prefix('?').unwrap_or(query);
    if !query.is_empty() {
        text.push('?');
        text.push_str(&query.replace('#', "%23"));
    }
    Ok(Uri::parse_absolute(&text)?.to_absolute_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(base: &str, relative: &str) -> String {
        Uri::parse_absolute(base)
            .and_then(|b| b.resolve(relative))
            .map(|u| u.to_absolute_string())
            .unwrap_or_else(|e| format!("error: {e}"))
    }

    #[test]
    fn rfc3986_examples() {
        // RFC 3986 §5.4.1 and §5.4.2 with base http://a/b/c/d;p?q
        let base = "http://a/b/c/d;p?q";
        for (relative, expected) in [
            ("g", "http://a/b/c/g"),
            ("./g", "http://a/b/c/g"),
            ("g/", "http://a/b/c/g/"),
            ("/g", "http://a/g"),
            ("//g", "http://g/"),
            ("?y", "http://a/b/c/d;p?y"),
            ("g?y", "http://a/b/c/g?y"),
            ("#s", "http://a/b/c/d;p?q#s"),
            ("g#s", "http://a/b/c/g#s"),
            (";x", "http://a/b/c/;x"),
            ("", "http://a/b/c/d;p?q"),
            (".", "http://a/b/c/"),
            ("..", "http://a/b/"),
            ("../g", "http://a/b/g"),
            ("../..", "http://a/"),
            ("../../../g", "http://a/g"),
            ("/./g", "http://a/g"),
            ("g.", "http://a/b/c/g."),
            ("..g", "http://a/b/c/..g"),
            ("./../g", "http://a/b/g"),
            ("g/../h", "http://a/b/c/h"),
            ("g;x=1/../y", "http://a/b/c/y"),
            ("https://other.example/x", "https://other.example/x"),
        ] {
            assert_eq!(resolve(base, relative), expected, "{relative:?}");
        }
    }

    #[test]
    fn dotnet_normalisation() {
        assert_eq!(
            resolve("HTTP://Contoso.COM:80", "a b"),
            "http://contoso.com/a%20b"
        );
        assert_eq!(
            resolve("https://x.org:8443/a/", "é"),
            "https://x.org:8443/a/%C3%A9"
        );
        assert_eq!(resolve("http://x.org/a\\b", "c"), "http://x.org/a/c");
        assert_eq!(
            resolve("http://x.org/a", "b?c d#e"),
            "http://x.org/b?c%20d#e"
        );
        assert_eq!(resolve("http://x.org/%41", "."), "http://x.org/");
        assert_eq!(resolve("urn:isbn:123", "#x"), "urn:isbn:123#x");
        assert_eq!(
            resolve("not a uri", "x"),
            "error: Invalid URI: The format of the URI could not be determined."
        );
        assert_eq!(resolve("", "x"), "error: Invalid URI: The URI is empty.");
        assert_eq!(
            resolve("http://", "x"),
            "error: Invalid URI: The hostname could not be parsed."
        );
        assert_eq!(
            resolve("http://x:99999/", "x"),
            "error: Invalid URI: Invalid port specified."
        );
        assert_eq!(
            resolve("http:relative", "x"),
            "error: Invalid URI: The hostname could not be parsed."
        );
    }

    #[test]
    fn components() {
        let u = Uri::parse_absolute("https://Example.com:8080/path/to/../resource?query=value#f")
            .expect("valid");
        assert_eq!(
            (u.scheme.as_str(), u.host(), u.port()),
            ("https", "example.com", 8080)
        );
        assert_eq!(
            (u.absolute_path(), u.query_text()),
            ("/path/resource".to_string(), "?query=value".to_string())
        );
        let u = Uri::parse_absolute("http://[::1]").expect("valid");
        assert_eq!(
            (u.host(), u.port(), u.absolute_path()),
            ("[::1]", 80, "/".to_string())
        );
        let u = Uri::parse_absolute("foo:bar").expect("valid");
        assert_eq!(
            (u.host(), u.port(), u.query_text()),
            ("", -1, String::new())
        );
    }

    #[test]
    fn escaping_and_decoding() {
        assert_eq!(escape_data_string("a b/c?é~"), "a%20b%2Fc%3F%C3%A9~");
        assert_eq!(url_decode("a+b%20c%2F%C3%A9"), "a b c/é");
        assert_eq!(url_decode("%u00e9%zz%4"), "é%zz%4");
        assert_eq!(url_decode("%FF"), "\u{fffd}");
    }

    proptest::proptest! {
        #[test]
        fn escaped_data_decodes_to_itself(text in "\\PC{0,16}") {
            proptest::prop_assert_eq!(url_decode(&escape_data_string(&text)), text);
        }

        #[test]
        fn parsing_and_resolving_never_panic(base in "[a-z:/.?#%@\\[\\]0-9 \\\\]{0,20}", relative in "[a-z:/.?#%@0-9 ]{0,12}") {
            if let Ok(uri) = Uri::parse_absolute(&base) {
                let _ = uri.to_absolute_string();
                if let Ok(resolved) = uri.resolve(&relative) {
                    // A resolved URI reads back as the same URI.
                    let text = resolved.to_absolute_string();
                    let again = Uri::parse_absolute(&text).map(|u| u.to_absolute_string());
                    proptest::prop_assert_eq!(again, Ok(text));
                }
            }
        }
    }

    #[test]
    fn building() {
        assert_eq!(
            build("https", "mystorage.blob.core.windows.net", Some(8080), "/templates/nestedTemplate.json", "?st=2025-05-09"),
            Ok("https://mystorage.blob.core.windows.net:8080/templates/nestedTemplate.json?st=2025-05-09".to_string())
        );
        assert_eq!(
            build("https", "x.org", Some(443), "a b", "q=1"),
            Ok("https://x.org/a%20b?q=1".to_string())
        );
        assert_eq!(
            build("http", "x.org", None, "", ""),
            Ok("http://x.org/".to_string())
        );
        assert_eq!(
            build("http", "x.org", None, "a?b#c", "d#e"),
            Ok("http://x.org/a%3Fb%23c?d%23e".to_string())
        );
        assert_eq!(
            build("http", "::1", None, "", ""),
            Ok("http://[::1]/".to_string())
        );
        assert_eq!(build("1http", "x.org", None, "", ""), Err(UriError::Format));
        assert_eq!(build("http", "", None, "", ""), Err(UriError::Hostname));
        assert_eq!(
            build("http", "x.org", Some(70000), "", ""),
            Err(UriError::Port)
        );
    }
}
