//! Engine API authentication: HS256 JSON Web Tokens signed with the shared secret, whose `iat`
//! claim must be within 60 seconds of now (the Engine API spec's rule).

use std::{
    future::Future,
    path::Path,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::{SystemTime, UNIX_EPOCH},
};

use alloy::primitives::hex;
use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine as _};
use hmac::{Hmac, Mac};
use http::{header, Request, StatusCode};
use jsonrpsee::{core::BoxError, server::HttpResponse};
use sha2::Sha256;

const IAT_WINDOW_SECS: u64 = 60;

#[derive(Clone)]
pub struct JwtSecret([u8; 32]);

impl std::fmt::Debug for JwtSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JwtSecret(..)")
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JwtError {
    #[error("missing bearer token")]
    Missing,
    #[error("malformed token")]
    Malformed,
    #[error("unsupported algorithm (only HS256)")]
    Algorithm,
    #[error("invalid signature")]
    Signature,
    #[error("iat claim missing or more than {IAT_WINDOW_SECS}s from now")]
    Stale,
}

impl JwtSecret {
    pub fn from_hex(text: &str) -> anyhow::Result<Self> {
        let text = text.trim();
        let text = text.strip_prefix("0x").unwrap_or(text);
        let bytes = hex::decode(text).map_err(|e| anyhow::anyhow!("JWT secret is not hex: {e}"))?;
        let bytes: [u8; 32] = bytes
            .try_into()
            .map_err(|_| anyhow::anyhow!("JWT secret must be 32 bytes (64 hex characters)"))?;
        Ok(Self(bytes))
    }

    /// Reads the secret file, or creates it with a random secret when it does not exist,
    /// readable by its owner alone (it lets whoever reads it drive the node's chain).
    pub fn load_or_create(path: &Path) -> anyhow::Result<Self> {
        let named = |e: std::io::Error| anyhow::anyhow!("JWT secret {}: {e}", path.display());
        if path.exists() {
            let text = std::fs::read_to_string(path).map_err(named)?;
            return Self::from_hex(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()));
        }
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("no randomness: {e}"))?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(named)?;
        }
        let mut file = std::fs::OpenOptions::new();
        file.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut file, 0o600);
        std::io::Write::write_all(
            &mut file.open(path).map_err(named)?,
            hex::encode(bytes).as_bytes(),
        )
        .map_err(named)?;
        Ok(Self(bytes))
    }

    fn mac(&self) -> Hmac<Sha256> {
        Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes keys of any length")
    }

    /// A token for "now", for clients (tests) of the Engine API.
    pub fn token(&self) -> String {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
        let claims = URL_SAFE_NO_PAD.encode(format!(r#"{{"iat":{now}}}"#));
        let signing_input = format!("{header}.{claims}");
        let mut mac = self.mac();
        mac.update(signing_input.as_bytes());
        let sig = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        format!("{signing_input}.{sig}")
    }

    pub fn validate(&self, token: &str) -> Result<(), JwtError> {
        let mut parts = token.split('.');
        let (Some(h), Some(c), Some(s), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(JwtError::Malformed);
        };
        let header: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(h).map_err(|_| JwtError::Malformed)?)
                .map_err(|_| JwtError::Malformed)?;
        if header.get("alg").and_then(|a| a.as_str()) != Some("HS256") {
            return Err(JwtError::Algorithm);
        }
        let sig = URL_SAFE_NO_PAD.decode(s).map_err(|_| JwtError::Malformed)?;
        let mut mac = self.mac();
        mac.update(h.as_bytes());
        mac.update(b".");
        mac.update(c.as_bytes());
        // verify_slice compares in constant time.
        mac.verify_slice(&sig).map_err(|_| JwtError::Signature)?;
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(c).map_err(|_| JwtError::Malformed)?)
                .map_err(|_| JwtError::Malformed)?;
        let iat = claims
            .get("iat")
            .and_then(|v| v.as_u64())
            .ok_or(JwtError::Stale)?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        if now.abs_diff(iat) > IAT_WINDOW_SECS {
            return Err(JwtError::Stale);
        }
        Ok(())
    }
}

/// Tower layer refusing requests without a valid token with HTTP 401.
#[derive(Clone, Debug)]
pub struct JwtLayer(pub Arc<JwtSecret>);

impl<S> tower::Layer<S> for JwtLayer {
    type Service = JwtService<S>;
    fn layer(&self, inner: S) -> Self::Service {
        JwtService {
            inner,
            secret: self.0.clone(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct JwtService<S> {
    inner: S,
    secret: Arc<JwtSecret>,
}

type BoxFuture = Pin<Box<dyn Future<Output = Result<HttpResponse, BoxError>> + Send>>;

impl<S, B> tower::Service<Request<B>> for JwtService<S>
where
    S: tower::Service<Request<B>, Response = HttpResponse, Error = BoxError>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = HttpResponse;
    type Error = BoxError;
    type Future = BoxFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let token = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let verdict = token
            .ok_or(JwtError::Missing)
            .and_then(|t| self.secret.validate(t));
        if let Err(err) = verdict {
            let body = serde_json::json!({"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":format!("engine API authentication failed: {err}")}});
            let response = http::Response::builder()
                .status(StatusCode::UNAUTHORIZED)
                .header(header::CONTENT_TYPE, "application/json")
                .body(jsonrpsee::server::HttpBody::from(body.to_string()))
                .expect("static response parts are valid");
            return Box::pin(async move { Ok(response) });
        }
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(inner.call(req))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A secret the node makes is its owner's alone, and read back the same on the next start.
    #[cfg(unix)]
    #[test]
    fn a_created_secret_is_private_and_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("simnode-jwt-{}", std::process::id()));
        let path = dir.join("jwt.hex");
        let made = JwtSecret::load_or_create(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        let again = JwtSecret::load_or_create(&path).unwrap();
        assert_eq!(again.validate(&made.token()), Ok(()));
        // A secret path that is a directory is named in the error.
        let err = JwtSecret::load_or_create(&dir).err().unwrap().to_string();
        assert!(err.contains(&dir.display().to_string()), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn token_round_trip_and_rejections() {
        let secret = JwtSecret::from_hex(&"11".repeat(32)).unwrap();
        assert_eq!(secret.validate(&secret.token()), Ok(()));
        let other = JwtSecret::from_hex(&"22".repeat(32)).unwrap();
        assert_eq!(other.validate(&secret.token()), Err(JwtError::Signature));
        assert_eq!(secret.validate("abc"), Err(JwtError::Malformed));
        // An iat an hour old is refused.
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
        let claims = URL_SAFE_NO_PAD.encode(br#"{"iat":1000}"#);
        let input = format!("{header}.{claims}");
        let mut mac = secret.mac();
        mac.update(input.as_bytes());
        let token = format!(
            "{input}.{}",
            URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
        );
        assert_eq!(secret.validate(&token), Err(JwtError::Stale));
    }
}
