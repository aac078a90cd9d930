//! gzip for HTTP answers when the client asks for it (`Accept-Encoding: gzip`), as hosted
//! providers, geth and reth answer: JSON-RPC answers are hex text and shrink several times
//! (a block's receipts, a trace), which is what an indexer pulling them over a network waits
//! on. Small answers go as they are: below [`MIN_SIZE`] the gzip frame costs more than it
//! saves. `--http.disable-compression` turns it off.

use std::io::Write;

use flate2::{write::GzEncoder, Compression};
use http::{header, HeaderMap, HeaderValue, StatusCode};
use http_body_util::{BodyExt, Full};
use jsonrpsee::{
    core::BoxError,
    server::{HttpBody, HttpResponse},
};

/// Answers shorter than this are sent uncompressed.
pub const MIN_SIZE: usize = 1024;
/// Answers this long are compressed on the blocking pool.
const OFFLOAD_SIZE: usize = 256 * 1024;

/// Whether `Accept-Encoding` takes gzip: `gzip` (or `x-gzip`, or `*`) listed with a weight
/// above zero, and not refused by an explicit `gzip;q=0` when `*` is what allows it.
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    let mut gzip = None;
    let mut any = None;
    for value in headers.get_all(header::ACCEPT_ENCODING) {
        let Ok(value) = value.to_str() else { continue };
        for item in value.split(',') {
            let mut parts = item.split(';');
            let coding = parts.next().unwrap_or("").trim();
            let weight_ok = parts.all(|param| {
                let param = param.trim();
                match param
                    .strip_prefix("q=")
                    .or_else(|| param.strip_prefix("Q="))
                {
                    Some(q) => q.trim().parse::<f32>().is_ok_and(|q| q > 0.0),
                    None => true,
                }
            });
            if coding.eq_ignore_ascii_case("gzip") || coding.eq_ignore_ascii_case("x-gzip") {
                gzip = Some(weight_ok);
            } else if coding == "*" {
                any = Some(weight_ok);
            }
        }
    }
    gzip.or(any).unwrap_or(false)
}

/// `response` gzipped when it is worth it (a body of [`MIN_SIZE`] or more, not already
/// encoded, a status that has a body).
pub async fn gzip(response: HttpResponse) -> Result<HttpResponse, BoxError> {
    let no_body = matches!(
        response.status(),
        StatusCode::SWITCHING_PROTOCOLS | StatusCode::NO_CONTENT | StatusCode::NOT_MODIFIED
    );
    if no_body || response.headers().contains_key(header::CONTENT_ENCODING) {
        return Ok(response);
    }
    let (mut parts, body) = response.into_parts();
    // jsonrpsee's answers are whole buffers already: collecting them waits for nothing.
    let bytes = body.collect().await?.to_bytes();
    parts
        .headers
        .append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    if bytes.len() < MIN_SIZE {
        return Ok(http::Response::from_parts(
            parts,
            HttpBody::new(Full::new(bytes)),
        ));
    }
    let zipped = if bytes.len() < OFFLOAD_SIZE {
        compress(&bytes)?
    } else {
        // Tens of milliseconds for a block full of logs: not on the thread other connections
        // are served from.
        tokio::task::spawn_blocking(move || compress(&bytes)).await??
    };
    parts
        .headers
        .insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    parts
        .headers
        .insert(header::CONTENT_LENGTH, HeaderValue::from(zipped.len()));
    Ok(http::Response::from_parts(parts, HttpBody::from(zipped)))
}

fn compress(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    // The fastest level: most of the saving at a fraction of the CPU of the default.
    let mut encoder = GzEncoder::new(Vec::with_capacity(bytes.len() / 4), Compression::fast());
    encoder.write_all(bytes)?;
    encoder.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &'static str) -> bool {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT_ENCODING, HeaderValue::from_static(value));
        accepts_gzip(&headers)
    }

    #[test]
    fn reads_accept_encoding() {
        assert!(!accepts_gzip(&HeaderMap::new()));
        assert!(accept("gzip"));
        assert!(accept("gzip, deflate, br"));
        assert!(accept("br;q=1.0, GZIP;q=0.5"));
        assert!(accept("x-gzip"));
        assert!(accept("*"));
        assert!(!accept("gzip;q=0"));
        assert!(!accept("gzip;q=0.0, deflate"));
        assert!(!accept("*, gzip;q=0"), "an explicit refusal wins over *");
        assert!(!accept("deflate, br"));
        assert!(!accept("identity"));
    }
}
