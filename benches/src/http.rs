//! Just enough HTTP/1.1 response parsing for a keep-alive load generator.
//!
//! A response is complete when its head is in and its body is, as given by
//! `Content-Length` or `Transfer-Encoding: chunked` (a response with neither, other
//! than 1xx/204/304, is delimited by the connection closing, which a load generator
//! treats as the end of the connection).

/// A complete response at the front of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed {
    /// Status code.
    pub status: u16,
    /// Bytes of the buffer the response takes (head and body).
    pub len: usize,
    /// The server will close the connection after it.
    pub close: bool,
}

/// Why a buffer does not hold a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// Not HTTP/1.x, or a malformed head or chunk.
    Malformed(&'static str),
    /// No length given: the body runs until the connection closes.
    UntilClose,
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    hay.get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

fn trim(b: &[u8]) -> &[u8] {
    let start = b
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(b.len());
    let end = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &b[start..end.max(start)]
}

fn parse_usize(b: &[u8], radix: u32) -> Option<usize> {
    usize::from_str_radix(std::str::from_utf8(b).ok()?, radix).ok()
}

/// Parses the response at the front of `buf`: `Ok(None)` when more bytes are needed.
pub fn parse_response(buf: &[u8]) -> Result<Option<Parsed>, ParseError> {
    let Some(head_end) = find(buf, b"\r\n\r\n", 0) else {
        if buf.len() >= 8 && !buf.starts_with(b"HTTP/1.") {
            return Err(ParseError::Malformed("not an HTTP/1.x response"));
        }
        return Ok(None);
    };
    let head = &buf[..head_end];
    if !head.starts_with(b"HTTP/1.") || head.len() < 12 {
        return Err(ParseError::Malformed("bad status line"));
    }
    let status = parse_usize(&head[9..12], 10)
        .and_then(|s| u16::try_from(s).ok())
        .ok_or(ParseError::Malformed("bad status code"))?;
    let mut close = head.starts_with(b"HTTP/1.0");
    let mut content_length = None;
    let mut chunked = false;
    for line in head.split(|&b| b == b'\n').skip(1) {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], trim(&line[colon + 1..]));
        if name.eq_ignore_ascii_case(b"content-length") {
            content_length =
                Some(parse_usize(value, 10).ok_or(ParseError::Malformed("bad content-length"))?);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            chunked = value.to_ascii_lowercase().ends_with(b"chunked");
        } else if name.eq_ignore_ascii_case(b"connection") {
            let v = value.to_ascii_lowercase();
            if v == b"close" {
                close = true;
            } else if v == b"keep-alive" {
                close = false;
            }
        }
    }
    let body_start = head_end + 4;
    let no_body = status < 200 || status == 204 || status == 304;
    let len = if no_body {
        body_start
    } else if chunked {
        match chunked_len(buf, body_start)? {
            Some(end) => end,
            None => return Ok(None),
        }
    } else if let Some(n) = content_length {
        body_start + n
    } else {
        return Err(ParseError::UntilClose);
    };
    Ok((buf.len() >= len).then_some(Parsed { status, len, close }))
}

/// End of a chunked body starting at `at`, `None` when incomplete.
fn chunked_len(buf: &[u8], mut at: usize) -> Result<Option<usize>, ParseError> {
    loop {
        let Some(eol) = find(buf, b"\r\n", at) else {
            return Ok(None);
        };
        let size_field = buf[at..eol].split(|&b| b == b';').next().unwrap_or(&[]);
        let size = parse_usize(trim(size_field), 16).ok_or(ParseError::Malformed("bad chunk"))?;
        at = eol + 2;
        if size == 0 {
            // Trailers, then an empty line.
            loop {
                let Some(eol) = find(buf, b"\r\n", at) else {
                    return Ok(None);
                };
                let empty = eol == at;
                at = eol + 2;
                if empty {
                    return Ok(Some(at));
                }
            }
        }
        at += size + 2;
        if at > buf.len() {
            return Ok(None);
        }
    }
}

/// `http://host:port` split into the address to connect to and the `Host` header.
pub fn split_url(url: &str) -> Result<(String, String), String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url}: only http:// URLs are supported"))?;
    let authority = rest.split('/').next().unwrap_or(rest);
    if authority.is_empty() {
        return Err(format!("{url}: no host"));
    }
    let connect = if authority.contains(':') {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    Ok((connect, authority.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_length_and_partial() {
        let r = b"HTTP/1.1 200 OK\r\ncontent-type: image/gif\r\nContent-Length: 3\r\n\r\nGIFHTTP";
        assert_eq!(parse_response(&r[..20]), Ok(None));
        assert_eq!(parse_response(&r[..r.len() - 5]), Ok(None));
        assert_eq!(
            parse_response(r),
            Ok(Some(Parsed {
                status: 200,
                len: r.len() - 4,
                close: false
            }))
        );
    }

    #[test]
    fn chunked_close_and_no_body() {
        let r = b"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
        let p = parse_response(r).expect("ok").expect("complete");
        assert_eq!((p.status, p.len, p.close), (503, r.len(), true));
        assert_eq!(parse_response(&r[..r.len() - 2]), Ok(None));
        let n = b"HTTP/1.1 204 No Content\r\n\r\n";
        assert_eq!(parse_response(n).expect("ok").map(|p| p.len), Some(n.len()));
        assert_eq!(
            parse_response(b"HTTP/1.1 200 OK\r\n\r\nxx"),
            Err(ParseError::UntilClose)
        );
        assert!(parse_response(b"garbage!\r\n\r\n").is_err());
    }

    #[test]
    fn urls() {
        assert_eq!(
            split_url("http://127.0.0.1:8080/x"),
            Ok(("127.0.0.1:8080".into(), "127.0.0.1:8080".into()))
        );
        assert_eq!(
            split_url("http://localhost"),
            Ok(("localhost:80".into(), "localhost".into()))
        );
        assert!(split_url("https://x").is_err());
    }
}
