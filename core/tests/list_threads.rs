//! `GET /v1/threads?parentThreadId=&cursor=&limit=`: the threads the caller
//! can read, paged with `nextCursor` (`null` on the last page).

mod common;

use common::{Harness, ADMIN};
use serde_json::Value;

/// Every thread id the caller sees, following `nextCursor` page by page.
fn list_all(h: &mut Harness, who: &str, filter: &str, limit: usize) -> Vec<String> {
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..100 {
        let mut target = format!("/v1/threads?limit={limit}{filter}");
        if let Some(c) = &cursor {
            target.push_str(&format!("&cursor={c}"));
        }
        let page = h.get(who, &target).expect(200).body;
        let threads = page["threads"].as_array().expect("threads array");
        assert!(threads.len() <= limit, "page over the limit: {page}");
        for t in threads {
            assert!(
                t["headSeq"].is_u64() && t["createdAt"].is_string(),
                "BubbleThread: {t}"
            );
            ids.push(t["threadId"].as_str().expect("threadId").to_owned());
        }
        match &page["nextCursor"] {
            Value::Null => return ids,
            Value::String(c) => cursor = Some(c.clone()),
            other => panic!("nextCursor must be a string or null: {other}"),
        }
    }
    panic!("paging never ended");
}

fn setup() -> Harness {
    let mut h = Harness::new();
    h.create_thread("alice", "a-1");
    h.create_subthread("alice", "a-1.child", "a-1");
    h.create_thread("alice", "a-2");
    h.create_thread("bob", "b-1");
    h.create_subthread("bob", "b-1.child", "b-1");
    h.create_thread("bob", "b-2");
    h.grant("b-2", "alice", "reader");
    h
}

#[test]
fn lists_only_readable_threads() {
    let mut h = setup();
    let mut alice = list_all(&mut h, "alice", "", 100);
    alice.sort();
    assert_eq!(alice, ["a-1", "a-1.child", "a-2", "b-2"]);
    let mut carol = list_all(&mut h, "carol", "", 100);
    carol.sort();
    assert!(carol.is_empty(), "{carol:?}");
    assert_eq!(list_all(&mut h, ADMIN, "", 100).len(), 6);
}

#[test]
fn pages_cover_every_thread_once() {
    let mut h = setup();
    for limit in [1, 2, 3, 5] {
        let mut ids = list_all(&mut h, ADMIN, "", limit);
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!((n, ids.len()), (6, 6), "limit {limit}");
    }
}

#[test]
fn filters_by_parent() {
    let mut h = setup();
    assert_eq!(
        list_all(&mut h, "alice", "&parentThreadId=a-1", 10),
        ["a-1.child"]
    );
    assert!(list_all(&mut h, "alice", "&parentThreadId=b-1", 10).is_empty());
    assert_eq!(
        list_all(&mut h, "bob", "&parentThreadId=b-1", 10),
        ["b-1.child"]
    );
}

#[test]
fn bad_limit_is_invalid_request() {
    let mut h = setup();
    for bad in ["limit=0", "limit=abc", "limit=-3"] {
        h.get("alice", &format!("/v1/threads?{bad}"))
            .expect_error(400, "invalid_request");
    }
}
