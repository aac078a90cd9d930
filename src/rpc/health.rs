//! `GET /health` (and `HEAD /health`): whether this node should take traffic, for load balancers
//! and orchestrators. It needs no API key and spends no key's quota: it reads the head and the
//! sync status from memory, nothing more.
//!
//! - 200 `{"status":"ok", "head":{...}, "syncing":false}` when the node follows its chain;
//! - 503 `"status":"syncing"` while it is behind its consensus client (`syncing` then holds
//!   `eth_syncing`'s numbers), so a balancer sends requests to nodes that answer for the
//!   chain's real head;
//! - 503 `"status":"stale"` when the caller asked `?max_head_age=SECONDS` and the head block is
//!   older than that (a consensus client that stopped sending blocks looks in sync otherwise);
//! - 503 `"status":"error"` when the head block cannot be read, or the disk refused a write
//!   (the node then stores no more blocks until it is restarted), or the key service
//!   (`--keys-backend redis` without `--redis.fail-open`) does not answer, so every keyed
//!   request is refused;
//! - 400 for a query it does not understand, naming it.
//!
//! Numbers are plain JSON numbers (this is for operators' tools, not a JSON-RPC answer).

use std::time::{SystemTime, UNIX_EPOCH};

use http::{header, Method, StatusCode};
use jsonrpsee::server::{HttpBody, HttpResponse};
use serde_json::{json, Value};
use simnode_api::ChainView;

/// The chain `/health` reports on.
#[derive(Clone)]
pub struct HealthSource(pub std::sync::Arc<dyn ChainView>);

impl std::fmt::Debug for HealthSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HealthSource(head ")?;
        self.0.head().latest.fmt(f)?;
        f.write_str(")")
    }
}

/// The answer to a health request (`method` is GET or HEAD; `query` the URI's query string;
/// `key_service` why the key service refuses every request, if it does).
pub fn answer(
    chain: &dyn ChainView,
    key_service: Option<&str>,
    method: &Method,
    query: Option<&str>,
) -> HttpResponse {
    let checked = check(chain, query, now_secs()).map(|report| match key_service {
        Some(why) => unhealthy(
            "error",
            json!(format!(
                "the key service does not answer ({why}): every request is refused with 503"
            )),
        ),
        None => report,
    });
    let (status, body) = match checked {
        Ok(report) => report,
        Err(problem) => (
            StatusCode::BAD_REQUEST,
            json!({"status": "bad request", "error": problem}),
        ),
    };
    let body = if method == Method::HEAD {
        HttpBody::empty()
    } else {
        HttpBody::from(body.to_string())
    };
    let response = http::Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json; charset=utf-8")
        .header(header::CACHE_CONTROL, "no-store")
        .body(body);
    match response {
        Ok(response) => response,
        // The status and headers are constants; a plain answer rather than a panic anyway.
        Err(_) => http::Response::new(HttpBody::from("internal error")),
    }
}

/// The status and body for `query` at wall-clock time `now` (seconds); `Err` names a bad query.
fn check(
    chain: &dyn ChainView,
    query: Option<&str>,
    now: u64,
) -> Result<(StatusCode, Value), String> {
    let max_head_age = parse_query(query)?;
    if let Some(why) = chain.write_failure() {
        let error = format!(
            "the database refused a write ({why}): no new blocks are stored until the node is \
             restarted with room on its disk"
        );
        return Ok(unhealthy("error", json!(error)));
    }
    let number = chain.head().latest;
    let header = match chain.header(number) {
        Ok(Some(header)) => header,
        Ok(None) => {
            return Ok(unhealthy(
                "error",
                json!(format!("head block {number} is not stored")),
            ))
        }
        Err(err) => return Ok(unhealthy("error", json!(err.to_string()))),
    };
    let age = now.saturating_sub(header.timestamp);
    let head = json!({
        "number": number,
        "hash": header.hash(),
        "timestamp": header.timestamp,
        "ageSeconds": age,
    });
    let behind = *chain.sync_target().borrow();
    if let Some(target) = behind {
        let syncing = json!({
            "startingBlock": target.starting_block,
            "currentBlock": number,
            "highestBlock": target.highest_block.unwrap_or(number).max(number),
        });
        return Ok((
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"status": "syncing", "head": head, "syncing": syncing}),
        ));
    }
    if max_head_age.is_some_and(|max| age > max) {
        return Ok((
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"status": "stale", "head": head, "syncing": false}),
        ));
    }
    Ok((
        StatusCode::OK,
        json!({"status": "ok", "head": head, "syncing": false}),
    ))
}

fn unhealthy(status: &str, error: Value) -> (StatusCode, Value) {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        json!({"status": status, "error": error}),
    )
}

/// `max_head_age=SECONDS`, the only parameter; an empty query is none.
fn parse_query(query: Option<&str>) -> Result<Option<u64>, String> {
    let mut max_head_age = None;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        match name {
            "max_head_age" => {
                let secs = value.parse::<u64>().map_err(|_| {
                    format!("max_head_age takes a whole number of seconds, not {value:?}")
                })?;
                max_head_age = Some(secs);
            }
            other => {
                return Err(format!(
                    "unknown parameter {other:?}; /health takes max_head_age=SECONDS"
                ))
            }
        }
    }
    Ok(max_head_age)
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query() {
        assert_eq!(parse_query(None), Ok(None));
        assert_eq!(parse_query(Some("")), Ok(None));
        assert_eq!(parse_query(Some("max_head_age=30")), Ok(Some(30)));
        assert!(parse_query(Some("max_head_age=")).is_err());
        assert!(parse_query(Some("max_head_age=-1")).is_err());
        assert!(parse_query(Some("max_head_age=1.5")).is_err());
        let err = parse_query(Some("age=3")).unwrap_err();
        assert!(err.contains("\"age\""), "{err}");
    }

    /// Once the disk refused a write, redb takes no more: the node says so until restarted.
    #[test]
    fn a_refused_write_makes_the_node_unhealthy() {
        use crate::store::{scratch::ScratchStore, StoreError};
        let store = ScratchStore::open("health-write", &crate::chain::dev_genesis());
        let (status, _) = check(&**store, None, now_secs()).unwrap();
        assert_eq!(status, StatusCode::OK);
        // Errors that are not the disk's leave it healthy.
        let other = StoreError::Corrupt("a bad row".into());
        assert!(store.noting_failure::<()>(Err(other)).is_err());
        assert_eq!(check(&**store, None, now_secs()).unwrap().0, StatusCode::OK);

        let full = std::io::Error::other("No space left on device");
        assert!(store
            .noting_failure::<()>(Err(StoreError::Db(redb::Error::Io(full))))
            .is_err());
        // What redb answers from then on does not replace the first cause.
        let after = StoreError::Db(redb::Error::PreviousIo);
        assert!(store.noting_failure::<()>(Err(after)).is_err());
        let (status, body) = check(&**store, Some("max_head_age=999999999"), now_secs()).unwrap();
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body["status"], "error", "{body}");
        let error = body["error"].as_str().unwrap_or_default();
        assert!(error.contains("No space left on device"), "{body}");
        assert!(error.contains("restarted"), "{body}");
    }
}
