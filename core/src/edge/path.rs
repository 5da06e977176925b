//! Paths: split on `/` first, then each segment percent-decoded on its own,
//! so that `%2F` stays inside its segment (a principal id may hold a `/`).
//! An invalid escape, bytes that are not UTF-8, or a `.`/`..` segment refuse
//! the request: a URL parser (a browser, an edge runtime, Node's `URL`)
//! would resolve or rewrite those before a JavaScript host sees the path,
//! so accepting them here would let two hosts read one request two ways.

use std::borrow::Cow;

use crate::error::BubbleError;

use super::query::decode;

/// Why a path was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// An invalid `%` escape, or a segment that does not decode to UTF-8.
    #[error("The path is not validly percent-encoded.")]
    Encoding,
    /// A `.` or `..` segment (also when percent-encoded).
    #[error("The path must not contain \".\" or \"..\" segments.")]
    DotSegment,
}

impl From<PathError> for BubbleError {
    fn from(err: PathError) -> BubbleError {
        BubbleError::InvalidRequest(err.to_string())
    }
}

/// The decoded segments of `raw` (an origin-form path, e.g.
/// `/v1/threads/t-1`); a path that does not start with `/` has none.
pub(crate) fn segments(raw: &str) -> Result<Vec<Cow<'_, str>>, PathError> {
    let Some(rest) = raw.strip_prefix('/') else {
        return Ok(Vec::new());
    };
    parts(rest).map(segment).collect()
}

/// The `/`-separated parts of `rest`, found by a plain scan of its bytes:
/// a path is short, and a byte loop costs less than `str::split`'s
/// searcher. Each part ends at an ASCII `/`, so it stays a `str`.
fn parts(rest: &str) -> impl Iterator<Item = &str> {
    let mut from = 0;
    rest.as_bytes().split(|&b| b == b'/').map(move |part| {
        let whole = &rest[from..from + part.len()];
        from += part.len() + 1;
        whole
    })
}

fn segment(raw: &str) -> Result<Cow<'_, str>, PathError> {
    let decoded = if raw.as_bytes().contains(&b'%') {
        Cow::Owned(decode(raw, false).ok_or(PathError::Encoding)?)
    } else {
        Cow::Borrowed(raw)
    };
    if is_dot_segment(&decoded) {
        return Err(PathError::DotSegment);
    }
    Ok(decoded)
}

/// Whether a decoded segment is `.` or `..`.
fn is_dot_segment(decoded: &str) -> bool {
    decoded == "." || decoded == ".."
}

/// Which engine API a path belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Api {
    /// `/v1/threads…`
    Threads,
    /// `/api/apps/:appId/…`
    Channels,
    /// `/apps/:appId/…`: Pusher's HTTP API.
    Pusher,
}

/// The engine API of decoded `segments`, if any.
pub(crate) fn api_of(segments: &[Cow<'_, str>]) -> Option<Api> {
    let first = |n: usize| segments.get(n).map(|s| s.as_ref());
    api_of_first(first(0), first(1), segments.len())
}

/// The engine API of a path whose first two segments are `first` and
/// `second`, `len` segments in all.
fn api_of_first(first: Option<&str>, second: Option<&str>, len: usize) -> Option<Api> {
    match (first, second, len) {
        (Some("v1"), Some("threads"), _) => Some(Api::Threads),
        (Some("api"), Some("apps"), 3..) => Some(Api::Channels),
        (Some("apps"), _, 2..) => Some(Api::Pusher),
        _ => None,
    }
}

/// The engine API of a raw path: every segment checked as [`segments`]
/// checks it, only the first two kept (no allocation unless one is
/// percent-encoded).
pub(crate) fn api_of_path(raw: &str) -> Result<Option<Api>, PathError> {
    let Some(rest) = raw.strip_prefix('/') else {
        return Ok(None);
    };
    if !rest.contains('%') {
        return api_of_unescaped(rest);
    }
    let (mut first, mut second, mut len) = (None, None, 0);
    for raw_segment in parts(rest) {
        let decoded = segment(raw_segment)?;
        match len {
            0 => first = Some(decoded),
            1 => second = Some(decoded),
            _ => {}
        }
        len += 1;
    }
    Ok(api_of_first(first.as_deref(), second.as_deref(), len))
}

/// Whose a request's path is.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum PathOwner<'a> {
    /// An engine API's: the engine splits it as it routes the request.
    Engine,
    /// The host's (page, health, metrics, sockets): its decoded segments.
    Host(Vec<Cow<'a, str>>),
}

/// Whose `raw` is, every segment checked as [`segments`] checks it. A path
/// without a `%` that names an engine API is told by its raw prefix, with
/// no segment split out; any other path is split once.
pub(crate) fn owner_of_path(raw: &str) -> Result<PathOwner<'_>, PathError> {
    if let Some(rest) = raw.strip_prefix('/').filter(|rest| !rest.contains('%')) {
        if api_of_unescaped(rest)?.is_some() {
            return Ok(PathOwner::Engine);
        }
    }
    let segments = segments(raw)?;
    Ok(match api_of(&segments) {
        Some(_) => PathOwner::Engine,
        None => PathOwner::Host(segments),
    })
}

/// The engine API of a path after its leading `/` that holds no `%`: no
/// segment needs decoding, so only a dot segment (looked for only when
/// there is a `.` at all) can refuse it, and the raw prefix decides.
fn api_of_unescaped(rest: &str) -> Result<Option<Api>, PathError> {
    if rest.contains('.') && parts(rest).any(is_dot_segment) {
        return Err(PathError::DotSegment);
    }
    Ok(api_of_plain(rest))
}

/// The engine API of a path after its leading `/` whose segments are its
/// raw ones, as [`api_of_first`] decides it: `v1/threads` with anything
/// after it, `api/apps/` followed by a third segment (perhaps empty), or
/// `apps/` followed by a second.
fn api_of_plain(rest: &str) -> Option<Api> {
    let after = |prefix: &str| rest.strip_prefix(prefix);
    if after("v1/threads").is_some_and(|tail| tail.is_empty() || tail.starts_with('/')) {
        Some(Api::Threads)
    } else if after("api/apps/").is_some() {
        Some(Api::Channels)
    } else if after("apps/").is_some() {
        Some(Api::Pusher)
    } else {
        None
    }
}

/// The API of an engine request's raw path (threads unless it is the
/// channels API: the threads router answers 404 for what it does not know).
pub(crate) fn engine_api(raw: &str) -> Api {
    api_of_path(raw).ok().flatten().unwrap_or(Api::Threads)
}

/// The decoded segments after `/v1/threads` (`None`: not a threads path).
pub(crate) fn threads_segments(raw: &str) -> Result<Option<Vec<Cow<'_, str>>>, PathError> {
    let mut segments = segments(raw)?;
    if api_of(&segments) != Some(Api::Threads) {
        return Ok(None);
    }
    segments.drain(..2);
    Ok(Some(segments))
}

/// An endpoint of the channels HTTP API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChannelsEndpoint {
    /// `POST /api/apps/:appId/auth`
    Auth,
    /// `POST /api/apps/:appId/events`
    Events,
}

/// `(appId, endpoint)` of a raw `/api/apps/:appId/{auth,events}` path.
pub(crate) fn channels_endpoint(raw: &str) -> Option<(String, ChannelsEndpoint)> {
    let segments = segments(raw).ok()?;
    let [api, apps, app, endpoint] = segments.as_slice() else {
        return None;
    };
    if api != "api" || apps != "apps" || app.is_empty() {
        return None;
    }
    let endpoint = match endpoint.as_ref() {
        "auth" => ChannelsEndpoint::Auth,
        "events" => ChannelsEndpoint::Events,
        _ => return None,
    };
    Some((app.as_ref().to_owned(), endpoint))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(raw: &str) -> Result<Vec<String>, PathError> {
        segments(raw).map(|s| s.into_iter().map(Cow::into_owned).collect())
    }

    #[test]
    fn segments_are_decoded_one_by_one() {
        assert_eq!(plain("/").unwrap(), [""]);
        assert_eq!(plain("/v1/threads").unwrap(), ["v1", "threads"]);
        assert_eq!(plain("/v1/threads/").unwrap(), ["v1", "threads", ""]);
        assert_eq!(
            plain("/v1/%74hreads/a%2Fb/c+d").unwrap(),
            ["v1", "threads", "a/b", "c+d"]
        );
        assert_eq!(plain("/caf%C3%A9").unwrap(), ["café"]);
        assert_eq!(plain("/café//ü").unwrap(), ["café", "", "ü"]);
        assert_eq!(plain("*").unwrap(), Vec::<String>::new());
    }

    #[test]
    fn bad_escapes_and_dot_segments_are_refused() {
        for bad in ["/a%zz", "/a%2", "/%", "/%FF", "/%C3%A9%zz", "/%C3"] {
            assert_eq!(plain(bad), Err(PathError::Encoding), "{bad}");
        }
        for bad in ["/v1/threads/..", "/./v1", "/v1/%2e%2E/x", "/%2E"] {
            assert_eq!(plain(bad), Err(PathError::DotSegment), "{bad}");
        }
        assert_eq!(plain("/v1/threads/...").unwrap()[2], "...");
    }

    #[test]
    fn engine_apis() {
        assert_eq!(engine_api("/api/apps/app-1/events"), Api::Channels);
        assert_eq!(engine_api("/api/apps/"), Api::Channels);
        assert_eq!(engine_api("/v1/threads/x"), Api::Threads);
        assert_eq!(engine_api("/apps/app-1/events"), Api::Pusher);
        assert_eq!(
            threads_segments("/v1/threads/t-1/grants/a%2Fb").unwrap(),
            Some(vec!["t-1".into(), "grants".into(), "a/b".into()])
        );
        assert_eq!(threads_segments("/v1/threads").unwrap(), Some(vec![]));
        assert_eq!(threads_segments("/v1/thread").unwrap(), None);
        assert_eq!(
            threads_segments("/v1/threads/%zz"),
            Err(PathError::Encoding)
        );
    }

    #[test]
    fn the_api_and_owner_of_a_raw_path_are_those_of_its_segments() {
        for raw in [
            "/v1/threads",
            "/v1/threads/t-1/events",
            "/v1/%74hreads/x",
            "/v1/threads/%zz",
            "/v1/threads/..",
            "/api/apps/a/events",
            "/api/apps/",
            "/api/apps",
            "/api/%61pps/a/events",
            "/apps/1/events",
            "/apps/",
            "/apps",
            "/socket",
            "/",
            "",
            "*",
            "/v1",
            "/a%2Fb/threads",
            "/v1/threads/a.b/.c/d.",
            "/v1/threads/./x",
            "/api/apps/a/..",
            "/apps/.",
            "//",
            "/v1/threads//",
            "/v1/threadsx",
            "/v1/threads-1/events",
            "/v1/threads/a/b/c/d",
            "/api/appsx/a",
            "/api/apps/a",
            "/appsx/1",
            "/apps/a/channels/c/users",
            "/v2/threads",
        ] {
            let whole = segments(raw).map(|s| api_of(&s));
            assert_eq!(api_of_path(raw), whole, "{raw}");
            let owner = segments(raw).map(|s| match api_of(&s) {
                Some(_) => PathOwner::Engine,
                None => PathOwner::Host(s),
            });
            assert_eq!(owner_of_path(raw), owner, "{raw}");
        }
    }

    #[test]
    fn channels_endpoints() {
        assert_eq!(
            channels_endpoint("/api/apps/app-1/auth"),
            Some(("app-1".into(), ChannelsEndpoint::Auth))
        );
        assert_eq!(
            channels_endpoint("/api/apps/app%2D1/events"),
            Some(("app-1".into(), ChannelsEndpoint::Events))
        );
        assert_eq!(channels_endpoint("/api/apps/app-1/other"), None);
        assert_eq!(channels_endpoint("/api/apps//events"), None);
        assert_eq!(channels_endpoint("/api/apps/a/b/events"), None);
        assert_eq!(channels_endpoint("/api/apps/app-1"), None);
    }
}
