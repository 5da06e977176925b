//! The client transcripts shared with the JavaScript client
//! (`clients/transcripts/*.json`): a client's inputs and, per input, the
//! outputs the core client gives. `core-client.json` is a scripted run;
//! `resume-*.json` are recorded from seeded runs of `client_resume.rs`
//! against the engine (and kept fresh there). The JavaScript client's test
//! (`tests/js/client.test.mjs`) replays the same inputs and must give the
//! same outputs, so the two clients follow one set of rules.
//! `BLESS=1` rewrites the expected outputs of `core-client.json` from the core.

mod transcripts;

use serde_json::Value;

fn read(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("the transcript")).expect("JSON")
}

#[test]
fn the_core_client_gives_the_scripted_transcripts_outputs() {
    let path = transcripts::folder().join("core-client.json");
    let mut doc = read(&path);
    let actual = transcripts::replay(&doc);
    if std::env::var_os("BLESS").is_some() {
        doc["outputs"] = actual;
        let text = serde_json::to_string_pretty(&doc).expect("JSON") + "\n";
        std::fs::write(&path, text).expect("write the transcript");
        return;
    }
    assert_eq!(
        actual, doc["outputs"],
        "the core's outputs differ from the transcript"
    );
}

#[test]
fn the_core_client_gives_every_recorded_transcripts_outputs() {
    let mut replayed = 0;
    for entry in std::fs::read_dir(transcripts::folder()).expect("the transcripts") {
        let path = entry.expect("an entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if !(name.starts_with("resume-") && name.ends_with(".json")) {
            continue;
        }
        let doc = read(&path);
        assert_eq!(
            transcripts::replay(&doc),
            doc["outputs"],
            "{name}: the core's outputs differ from the transcript"
        );
        replayed += 1;
    }
    assert!(
        replayed > 0,
        "no recorded transcript in {:?}",
        transcripts::folder()
    );
}
