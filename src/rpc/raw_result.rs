//! The HTTP side of [`simnode_api::raw_answer`]: a single request's answer written around the
//! JSON text its method left in the request's [`RawAnswerSlot`], instead of the copy jsonrpsee
//! serialized (and parsed again) from it.
//!
//! jsonrpsee still answers the call, with the method's `null` stand-in as the result; that
//! answer (a few bytes) gives the id to answer with. The text goes out as its own chunk of the
//! body: it is not copied again.

use bytes::Bytes;
use futures_util::stream;
use http::header;
use http_body_util::{BodyExt, Full, StreamBody};
use jsonrpsee::{
    core::BoxError,
    server::{HttpBody, HttpResponse},
    types::error::{OVERSIZED_RESPONSE_CODE, OVERSIZED_RESPONSE_MSG},
};
use serde::Deserialize;
use serde_json::value::RawValue;
use simnode_api::raw_answer::RawAnswerSlot;

/// jsonrpsee's answer with the stand-in, as far as it is read here.
#[derive(Deserialize)]
struct StandIn<'a> {
    #[serde(borrow)]
    id: &'a RawValue,
    /// The result is there and is `null` (an `Option` would not tell null from absent).
    #[serde(rename = "result", default, deserialize_with = "is_null")]
    null_result: bool,
    #[serde(borrow, default)]
    error: Option<&'a RawValue>,
}

fn is_null<'de, D: serde::Deserializer<'de>>(value: D) -> Result<bool, D::Error> {
    Ok(<&RawValue>::deserialize(value)?.get() == "null")
}

/// `response` (jsonrpsee's answer to the request that carried `slot`) with the text the method
/// left in the slot as its result; `response` as it is when the slot is empty (most methods
/// leave nothing) or the answer is not the stand-in (an error replaced it). Past the slot's
/// limit the answer is jsonrpsee's "response too big" error, as it would have been through
/// jsonrpsee.
pub async fn fill(response: HttpResponse, slot: &RawAnswerSlot) -> Result<HttpResponse, BoxError> {
    let Some(text) = slot.take() else {
        return Ok(response);
    };
    let (mut parts, body) = response.into_parts();
    let stand_in = body.collect().await?.to_bytes();
    let id = match serde_json::from_slice::<StandIn<'_>>(&stand_in) {
        Ok(StandIn {
            id,
            null_result: true,
            error: None,
        }) => id,
        _ => {
            let body = HttpBody::new(Full::new(stand_in.clone()));
            return Ok(HttpResponse::from_parts(parts, body));
        }
    };
    let head = Bytes::from(format!(r#"{{"jsonrpc":"2.0","id":{},"result":"#, id.get()));
    let tail = Bytes::from_static(b"}");
    let length = head.len() + text.len() + tail.len();
    let body = if length > slot.max_bytes() {
        parts.headers.remove(header::CONTENT_LENGTH);
        HttpBody::from(too_big(id, slot.max_bytes()))
    } else {
        let chunks =
            [head, text, tail].map(|chunk| Ok::<_, BoxError>(http_body::Frame::data(chunk)));
        parts.headers.insert(header::CONTENT_LENGTH, length.into());
        HttpBody::new(StreamBody::new(stream::iter(chunks)))
    };
    Ok(HttpResponse::from_parts(parts, body))
}

/// jsonrpsee's answer to a result past the response size limit.
fn too_big(id: &RawValue, max_response_bytes: usize) -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": OVERSIZED_RESPONSE_CODE,
            "message": OVERSIZED_RESPONSE_MSG,
            "data": format!("Exceeded max limit of {max_response_bytes}"),
        }
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use simnode_api::raw_answer::SharedJson;

    use super::*;

    fn answer(body: &str) -> HttpResponse {
        let mut response = HttpResponse::new(HttpBody::from(body.to_owned()));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        response
    }

    async fn text(response: HttpResponse) -> (Option<String>, String) {
        let length = response
            .headers()
            .get(header::CONTENT_LENGTH)
            .map(|v| v.to_str().unwrap().to_owned());
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (length, String::from_utf8(body.to_vec()).unwrap())
    }

    fn slot_with(text: &'static str, max_bytes: usize) -> RawAnswerSlot {
        let slot = RawAnswerSlot::new(max_bytes);
        let mut extensions = http::Extensions::new();
        extensions.insert(slot.clone());
        let json = RawValue::from_string(text.to_owned()).unwrap();
        simnode_api::raw_answer::answer(&extensions, SharedJson::new(json));
        slot
    }

    #[tokio::test]
    async fn the_left_text_becomes_the_result_with_the_answers_id() {
        let slot = slot_with(r#"[{"a":1}]"#, 1000);
        let filled = fill(
            answer(r#"{"jsonrpc":"2.0","id":"x-7","result":null}"#),
            &slot,
        )
        .await
        .unwrap();
        let (length, body) = text(filled).await;
        assert_eq!(body, r#"{"jsonrpc":"2.0","id":"x-7","result":[{"a":1}]}"#);
        assert_eq!(length, Some(body.len().to_string()));
    }

    #[tokio::test]
    async fn an_empty_slot_or_an_error_answer_is_left_alone() {
        let error = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"boom"}}"#;
        let untouched = fill(answer(error), &RawAnswerSlot::new(1000))
            .await
            .unwrap();
        assert_eq!(text(untouched).await.1, error);

        let slot = slot_with("[1]", 1000);
        let replaced = fill(answer(error), &slot).await.unwrap();
        assert_eq!(
            text(replaced).await.1,
            error,
            "the middleware's error stands"
        );
    }

    #[tokio::test]
    async fn past_the_limit_the_answer_is_the_too_big_error() {
        // The result fits the slot; with the answer around it, it does not.
        let slot = slot_with(r#""0123456789012345678901234567890123456789""#, 60);
        let filled = fill(answer(r#"{"jsonrpc":"2.0","id":3,"result":null}"#), &slot)
            .await
            .unwrap();
        let body: serde_json::Value = serde_json::from_str(&text(filled).await.1).unwrap();
        assert_eq!(body["id"], 3);
        assert_eq!(body["error"]["code"], OVERSIZED_RESPONSE_CODE);
        assert_eq!(body["error"]["data"], "Exceeded max limit of 60");
    }
}
