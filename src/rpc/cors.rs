//! Browser access. A dapp or wallet page calling `POST /v3/<key>` from another origin needs CORS:
//! the browser first sends a preflight (`OPTIONS` with `Origin` and
//! `Access-Control-Request-Method`), then the request, and shows the page an answer only when
//! it carries `Access-Control-Allow-Origin`. `--http.corsdomain` lists the origins that get
//! those headers (default `*`, any, as hosted providers answer: the key in the path is what
//! authenticates). Error answers carry them too, so a page can read a 401 or a 429.
//!
//! Browsers do not apply CORS to WebSockets but do send `Origin` with the upgrade;
//! `--ws.origins` refuses upgrades from origins not listed (403). Clients that send no `Origin`
//! (servers, scripts) are never affected by either list.

use http::{header, HeaderMap, HeaderValue, StatusCode};
use jsonrpsee::server::{HttpBody, HttpResponse};

/// The origins one of the two flags lets in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origins {
    Any,
    /// Origins (`scheme://host[:port]`, lowercase, or `scheme://*.domain[:port]` for its
    /// subdomains: see [`origin_matches`]); empty: none.
    Only(Vec<String>),
}

impl Origins {
    /// From the flag's values (already checked by [`parse_origin_flag`]): `*` anywhere means
    /// any origin, `none` alone none.
    pub fn from_flag(values: &[String]) -> Self {
        if values.iter().any(|v| v == "*") {
            return Self::Any;
        }
        Self::Only(
            values
                .iter()
                .filter(|v| v.as_str() != "none")
                .cloned()
                .collect(),
        )
    }

    pub fn allows(&self, origin: &HeaderValue) -> bool {
        match self {
            Self::Any => true,
            Self::Only(list) => origin
                .to_str()
                .is_ok_and(|o| list.iter().any(|allowed| origin_matches(allowed, o))),
        }
    }

    /// The `Access-Control-Allow-Origin` value for a request from `origin`, `None` when that
    /// origin is not let in.
    fn allow_origin(&self, origin: &HeaderValue) -> Option<HeaderValue> {
        match self {
            Self::Any => Some(HeaderValue::from_static("*")),
            Self::Only(_) if self.allows(origin) => Some(origin.clone()),
            Self::Only(_) => None,
        }
    }
}

/// Whether `origin` (as a browser sent it) is the listed origin `allowed` (as
/// [`parse_origin_flag`] keeps it), or one of its subdomains when `allowed` is
/// `scheme://*.domain[:port]` (geth's `--http.corsdomain` takes that form too).
pub fn origin_matches(allowed: &str, origin: &str) -> bool {
    let Some((scheme, domain)) = allowed.split_once("://*.") else {
        return allowed.eq_ignore_ascii_case(origin);
    };
    let (scheme, domain) = (scheme.to_ascii_lowercase(), domain.to_ascii_lowercase());
    let origin = origin.to_ascii_lowercase();
    origin
        .strip_prefix(scheme.as_str())
        .and_then(|rest| rest.strip_prefix("://"))
        .and_then(|host| host.strip_suffix(domain.as_str()))
        .and_then(|sub| sub.strip_suffix('.'))
        .is_some_and(|sub| !sub.is_empty() && !sub.starts_with('.'))
}

/// clap's check of one value of `--http.corsdomain` / `--ws.origins`: `*`, `none`, or an
/// origin as browsers send it (`https://app.example.com`, `http://localhost:3000`), without a
/// path, or one for every subdomain of a domain (`https://*.example.com`). A bare host name, or
/// a `*` anywhere else, would never match, so it is refused rather than ignored.
pub fn parse_origin_flag(value: &str) -> Result<String, String> {
    let value = value.trim();
    if value == "*" || value == "none" {
        return Ok(value.to_string());
    }
    let value = value.strip_suffix('/').unwrap_or(value);
    let Some((scheme, host)) = value.split_once("://") else {
        return Err(format!(
            "{value:?} is not an origin: write it as browsers send it, e.g. https://{value}"
        ));
    };
    let scheme_ok = !scheme.is_empty()
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    if !scheme_ok || host.is_empty() || host.contains('/') {
        return Err(format!(
            "{value:?} is not an origin (scheme://host[:port], no path)"
        ));
    }
    let named = host.strip_prefix("*.").unwrap_or(host);
    if named.contains('*') || named.is_empty() || named.starts_with('.') || named.starts_with(':') {
        return Err(format!(
            "{value:?} is not an origin: a wildcard may only stand for subdomains, as in {scheme}://*.example.com"
        ));
    }
    // Browsers leave a scheme's default port out of `Origin`: so must the listed origin, or it
    // would never match.
    let (scheme, host) = (scheme.to_ascii_lowercase(), host.to_ascii_lowercase());
    let host = match (scheme.as_str(), host.rsplit_once(':')) {
        ("https", Some((name, "443"))) | ("http", Some((name, "80"))) => name.to_string(),
        _ => host,
    };
    Ok(format!("{scheme}://{host}"))
}

/// Adds the CORS headers for a request from `origin` to its answer (nothing when the origin is
/// not listed: the browser then keeps the answer from the page).
pub fn add_headers(origins: &Origins, origin: &HeaderValue, headers: &mut HeaderMap) {
    if let Some(allow) = origins.allow_origin(origin) {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, allow);
        // A page must be able to read when to retry after a 429.
        headers.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("Retry-After"),
        );
        // Answers differ by origin when only some are listed; caches must keep them apart.
        if matches!(origins, Origins::Only(_)) {
            headers.append(header::VARY, HeaderValue::from_static("Origin"));
        }
    }
}

/// The answer to a preflight from `origin` for a path the node serves: 204 with what the
/// browser asked to use, or `None` when the origin is not listed.
pub fn preflight(
    origins: &Origins,
    origin: &HeaderValue,
    request: &HeaderMap,
) -> Option<HttpResponse> {
    if !origins.allows(origin) {
        return None;
    }
    let mut response = http::Response::new(HttpBody::empty());
    *response.status_mut() = StatusCode::NO_CONTENT;
    let headers = response.headers_mut();
    add_headers(origins, origin, headers);
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("POST, GET, OPTIONS"),
    );
    // Whatever headers the page wants to send (content-type, a client's own): the key in the
    // path is the only credential, so no header needs keeping out.
    let asked = request
        .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
        .cloned()
        .unwrap_or_else(|| HeaderValue::from_static("content-type"));
    headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, asked);
    headers.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    Some(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(s: &'static str) -> HeaderValue {
        HeaderValue::from_static(s)
    }

    #[test]
    fn flag_values() {
        assert_eq!(parse_origin_flag("*"), Ok("*".into()));
        assert_eq!(parse_origin_flag("none"), Ok("none".into()));
        assert_eq!(
            parse_origin_flag("https://App.Example.com/"),
            Ok("https://app.example.com".into())
        );
        assert_eq!(
            parse_origin_flag("http://localhost:3000"),
            Ok("http://localhost:3000".into())
        );
        let err = parse_origin_flag("app.example.com").unwrap_err();
        assert!(err.contains("https://app.example.com"), "{err}");
        assert!(parse_origin_flag("https://app.example.com/path").is_err());
        // A default port is left out, as browsers leave it out of `Origin`.
        assert_eq!(
            parse_origin_flag("https://A.com:443"),
            Ok("https://a.com".into())
        );
        assert_eq!(
            parse_origin_flag("HTTP://a.com:80"),
            Ok("http://a.com".into())
        );
        assert_eq!(
            parse_origin_flag("https://a.com:8443"),
            Ok("https://a.com:8443".into())
        );
        assert!(parse_origin_flag("://x").is_err());
        assert!(parse_origin_flag("https://").is_err());
        assert_eq!(
            parse_origin_flag("https://*.Example.com:443"),
            Ok("https://*.example.com".into())
        );
        for bad in [
            "https://a*.example.com",
            "https://*",
            "https://*.",
            "https://x.*.com",
            "*.example.com",
        ] {
            assert!(parse_origin_flag(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_wildcard_stands_for_subdomains() {
        let sub = Origins::from_flag(&["https://*.example.com".into()]);
        assert!(sub.allows(&value("https://app.example.com")));
        assert!(sub.allows(&value("https://a.b.Example.com")));
        assert!(!sub.allows(&value("https://example.com")));
        assert!(!sub.allows(&value("http://app.example.com")));
        assert!(!sub.allows(&value("https://app.example.com:8443")));
        assert!(!sub.allows(&value("https://evilexample.com")));
        assert!(!sub.allows(&value("https://app.example.com.evil.io")));
        let with_port = Origins::from_flag(&["http://*.localhost:3000".into()]);
        assert!(with_port.allows(&value("http://a.localhost:3000")));
        assert!(!with_port.allows(&value("http://a.localhost")));
    }

    #[test]
    fn which_origins_get_in() {
        let any = Origins::from_flag(&["*".into()]);
        assert_eq!(any, Origins::Any);
        assert_eq!(any.allow_origin(&value("https://a.io")), Some(value("*")));

        let some = Origins::from_flag(&["https://a.io".into(), "http://localhost:3000".into()]);
        assert!(some.allows(&value("https://a.io")));
        assert!(some.allows(&value("HTTPS://A.IO")));
        assert!(!some.allows(&value("https://b.io")));
        assert!(!some.allows(&value("https://a.io.evil.com")));
        assert_eq!(
            some.allow_origin(&value("https://a.io")),
            Some(value("https://a.io"))
        );
        let mut headers = HeaderMap::new();
        add_headers(&some, &value("https://b.io"), &mut headers);
        assert!(headers.is_empty());

        let none = Origins::from_flag(&["none".into()]);
        assert!(!none.allows(&value("https://a.io")));
    }
}
