//! Checking a finished run: every answer against the model, and every
//! connection's frames for every thread against what it should have seen.

use proptest::prelude::*;

use crate::common::Resp;
use crate::run::{Answer, Marker, Reopen, Run, Track};
use crate::scenario::*;

/// Whether `resp` is a history page that `Answer::Page` allows.
fn page_fits(resp: &Resp, from: u64, limit: u64, lo: u64, runs: &[String]) -> bool {
    let hi = runs.len() as u64;
    let Some(events) = resp.body["events"].as_array() else {
        return false;
    };
    let seqs: Vec<u64> = events.iter().filter_map(|e| e["seq"].as_u64()).collect();
    let n = seqs.len() as u64;
    let contiguous = seqs == (from..from + n).collect::<Vec<_>>();
    let runs_match = events
        .iter()
        .zip(from..)
        .all(|(e, seq)| runs.get((seq - 1) as usize).map(String::as_str) == e["runId"].as_str());
    let last = from + n - 1;
    let next = &resp.body["nextSeq"];
    let (bounded, next_ok) = if n == 0 {
        // The durable head it rested on was below `from`; `nextSeq` points
        // at `from` while appends not yet durable reach it.
        (
            from > lo,
            next.is_null() || (next.as_u64() == Some(from) && from <= hi),
        )
    } else {
        // It stopped at `limit` or at a head between `lo` and `hi`; a page
        // that did not reach the head points at the next seq.
        let reached_head = last >= lo;
        (
            last <= hi && n <= limit && (n == limit || reached_head),
            next.as_u64() == Some(last + 1) || (next.is_null() && reached_head),
        )
    };
    resp.status == 200 && contiguous && runs_match && bounded && next_ok
}

impl<S: Reopen> Run<S> {
    pub(crate) fn check(&mut self) -> Result<(), TestCaseError> {
        for (req, answer, what) in std::mem::take(&mut self.answers) {
            let resp = self.h.response(req);
            if let Answer::Lost = answer {
                prop_assert!(resp.is_none(), "{}: answered across a crash", what);
                continue;
            }
            let resp = resp.ok_or_else(|| TestCaseError::fail(format!("{what}: no answer")))?;
            let ok = match &answer {
                Answer::Ok => (200..300).contains(&resp.status),
                Answer::Status(status) => resp.status == *status,
                Answer::Event { status, seq } => {
                    resp.status == *status
                        && resp.body["event"]["seq"] == *seq
                        && (*status == 201 || resp.body["duplicate"] == true)
                }
                Answer::Error(status, code) => resp.status == *status && resp.code() == *code,
                Answer::Page {
                    from,
                    limit,
                    lo,
                    runs,
                } => page_fits(&resp, *from, *limit, *lo, runs),
                Answer::Lost => unreachable!("handled above"),
            };
            prop_assert!(
                ok,
                "{}: expected {:?}, got {} {}",
                what,
                answer,
                resp.status,
                resp.body
            );
        }
        for thread in 0..THREADS {
            let Some(model) = self.model.threads.get(&thread) else {
                continue;
            };
            let history = self.h.history(&thread_name(thread));
            let seqs: Vec<u64> = history
                .iter()
                .map(|e| e["seq"].as_u64().unwrap_or(0))
                .collect();
            prop_assert_eq!(
                seqs,
                (1..=model.head).collect::<Vec<_>>(),
                "history of t{}",
                thread
            );
            prop_assert_eq!(
                self.h.thread(&thread_name(thread))["headSeq"].as_u64(),
                Some(model.head)
            );
        }
        for instance in 0..self.instances.len() {
            for thread in 0..THREADS {
                self.check_track(instance, thread)?;
            }
        }
        Ok(())
    }

    /// Replays what connection `instance` saw for `thread` against the
    /// expected markers and episodes. A closed instance may miss what was
    /// still held back when it closed.
    fn check_track(&self, instance: usize, thread: usize) -> Result<(), TestCaseError> {
        let name = thread_name(thread);
        let empty = Track::default();
        let track = self.tracks.get(&(instance, thread)).unwrap_or(&empty);
        let (conn, was_closed) = self.instances[instance];
        let principal = CONNS[conn];
        let model = self.model.threads.get(&thread);
        let mut markers = track.markers.iter();
        let mut current: Option<usize> = None;
        let mut last_ended: Option<usize> = None;
        let mut delivered: Vec<Vec<u64>> = vec![Vec::new(); track.episodes.len()];
        let mut through: Vec<u64> = vec![0; track.episodes.len()];
        let ctx = |what: &str| {
            format!(
                "conn {conn}#{instance} ({}) on {name}: {what}",
                principal_name(principal)
            )
        };
        for (at, frame) in self.seen[instance]
            .iter()
            .filter(|(_, f)| f["threadId"] == name.as_str())
        {
            let kind = frame["type"].as_str().unwrap_or("");
            if kind == "thread.event" {
                let seq = frame["event"]["seq"].as_u64().unwrap_or(0);
                let Some(ep) = current.or(last_ended) else {
                    return Err(TestCaseError::fail(ctx(&format!(
                        "event {seq} outside any subscription"
                    ))));
                };
                let episode = &track.episodes[ep];
                if current.is_none() {
                    // After the client's unsubscribe, events in flight are ignored.
                    prop_assert!(
                        episode.unsubscribed_at.is_some(),
                        "{}",
                        ctx(&format!("event {seq} after subscription_closed"))
                    );
                    continue;
                }
                if episode.unsubscribed_at.is_some_and(|u| *at >= u) {
                    continue;
                }
                if seq > through[ep] {
                    let readers = &model.expect("thread exists").readers;
                    let could = readers
                        .get(seq as usize - 1)
                        .is_some_and(|r| r.contains(&principal));
                    prop_assert!(
                        could,
                        "{}",
                        ctx(&format!(
                            "live event {seq} delivered to a principal who could not read it"
                        ))
                    );
                }
                delivered[ep].push(seq);
                continue;
            }
            let want = markers.next();
            match (kind, want) {
                ("thread.subscription_opened", Some(Marker::Opened(ep))) => {
                    let got = frame["throughSeq"].as_u64().unwrap_or(u64::MAX);
                    let e = &track.episodes[*ep];
                    prop_assert!(
                        (e.through_lo..=e.through_hi).contains(&got),
                        "{}",
                        ctx(&format!(
                            "throughSeq {got}, head at registration {}..={}",
                            e.through_lo, e.through_hi
                        ))
                    );
                    through[*ep] = got;
                    current = Some(*ep);
                    last_ended = None;
                }
                ("error", Some(Marker::Error(code))) => {
                    prop_assert_eq!(frame["code"].as_str(), Some(*code), "{}", ctx("error code"));
                }
                ("thread.subscription_closed", Some(Marker::Closed)) => {
                    prop_assert_eq!(
                        frame["reason"].as_str(),
                        Some("not_found"),
                        "{}",
                        ctx("close reason")
                    );
                    last_ended = current.take();
                }
                (_, want) => {
                    return Err(TestCaseError::fail(ctx(&format!(
                        "got {frame}, expected {want:?}"
                    ))));
                }
            }
        }
        let rest: Vec<&Marker> = markers.collect();
        prop_assert!(
            rest.is_empty() || was_closed,
            "{}",
            ctx(&format!("never saw {rest:?}"))
        );
        let head = model.map_or(0, |m| m.head);
        for (ep, episode) in track.episodes.iter().enumerate() {
            let start = episode.from_seq.min(through[ep] + 1);
            let got = &delivered[ep];
            let prefix: Vec<u64> = (start..start + got.len() as u64).collect();
            prop_assert_eq!(
                got,
                &prefix,
                "{}",
                ctx(&format!(
                    "episode {ep} (fromSeq {}) not contiguous",
                    episode.from_seq
                ))
            );
            if episode.unsubscribed_at.is_none() && !episode.revoked {
                let all: Vec<u64> = (start..=head).collect();
                prop_assert_eq!(
                    got,
                    &all,
                    "{}",
                    ctx(&format!(
                        "episode {ep} (fromSeq {}) incomplete",
                        episode.from_seq
                    ))
                );
            }
        }
        Ok(())
    }
}
