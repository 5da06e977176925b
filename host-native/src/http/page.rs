//! The web page built into the binary: `www/` and its wasm package
//! (`www/pkg`, committed and kept fresh by `scripts/build-page-pkg.sh`),
//! embedded at compile time by `build.rs`. `--www DIR` serves a directory
//! instead.

use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};

include!(concat!(env!("OUT_DIR"), "/page.rs"));

/// The media type of a page file, from its extension.
pub(crate) fn content_type(path: &str) -> &'static str {
    let ext = path.rsplit_once('.').map_or("", |(_, ext)| ext);
    match ext {
        "html" => "text/html; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "js" | "mjs" => "text/javascript",
        "wasm" => "application/wasm",
        "json" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "txt" | "sha256" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

/// The embedded file at the (percent-decoded) request `path`: `/` and paths
/// ending in `/` are their `index.html`.
fn find(path: &str) -> Option<(&'static str, &'static [u8], &'static str)> {
    let rel = path.strip_prefix('/').unwrap_or(path);
    let index;
    let rel = if rel.is_empty() || rel.ends_with('/') {
        index = format!("{rel}index.html");
        index.as_str()
    } else {
        rel
    };
    FILES.iter().copied().find(|(name, _, _)| *name == rel)
}

/// Answers `GET`/`HEAD` for a page file; `304` when the browser's copy is
/// current, `404` for any other path, `405` for other methods.
pub(crate) fn serve(method: &Method, path: &str, headers: &HeaderMap) -> Response {
    let Some((name, body, etag)) = find(path) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    if method != Method::GET && method != Method::HEAD {
        let mut response = StatusCode::METHOD_NOT_ALLOWED.into_response();
        response
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|tags| tags.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut response = Response::new(Body::from(body));
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(content_type(name)),
        );
        response
    };
    let out = response.headers_mut();
    out.insert(header::ETAG, HeaderValue::from_static(etag));
    out.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_and_its_package_are_embedded() {
        for path in [
            "/",
            "/index.html",
            "/app.mjs",
            "/pkg/bubble_wasm.js",
            "/pkg/bubble_wasm_bg.wasm",
            "/pkg/host.mjs",
            "/in-page-transport.mjs",
            "/sim.mjs",
        ] {
            assert!(find(path).is_some(), "{path} is not embedded");
        }
        assert!(find("/missing.js").is_none());
        assert!(find("/../Cargo.toml").is_none());
        let (name, _, _) = find("/").unwrap();
        assert_eq!(name, "index.html");
    }

    #[test]
    fn content_types() {
        assert_eq!(content_type("index.html"), "text/html; charset=utf-8");
        assert_eq!(content_type("pkg/bubble_wasm_bg.wasm"), "application/wasm");
        assert_eq!(content_type("app.mjs"), "text/javascript");
        assert_eq!(content_type("pkg/bubble_wasm.js"), "text/javascript");
        assert_eq!(content_type("style.css"), "text/css; charset=utf-8");
    }

    #[test]
    fn answers() {
        let get = serve(&Method::GET, "/pkg/bubble_wasm_bg.wasm", &HeaderMap::new());
        assert_eq!(get.status(), StatusCode::OK);
        assert_eq!(get.headers()[header::CONTENT_TYPE], "application/wasm");
        let etag = get.headers()[header::ETAG].clone();
        let mut again = HeaderMap::new();
        again.insert(header::IF_NONE_MATCH, etag);
        let cached = serve(&Method::GET, "/pkg/bubble_wasm_bg.wasm", &again);
        assert_eq!(cached.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(
            serve(&Method::POST, "/", &HeaderMap::new()).status(),
            StatusCode::METHOD_NOT_ALLOWED
        );
        assert_eq!(
            serve(&Method::GET, "/nope", &HeaderMap::new()).status(),
            StatusCode::NOT_FOUND
        );
    }
}
