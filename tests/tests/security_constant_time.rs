//! Secrets are compared in constant time: no `==` or `!=` in the engine's
//! or the native server's source has an operand named like a secret, a
//! signature or a token (`subtle`'s `ct_eq` and `hmac`'s `verify_slice`
//! are the way to compare those). A source scan, so it reads code the
//! tests never run too: comments and string literals are ignored, as are
//! operands that are types or enum variants (`Stage::AwaitingToken`) and
//! lengths (`tokens.len() == 0`).

use std::path::{Path, PathBuf};

/// Words that name a value that must not be compared with `==`.
const SECRET_WORDS: [&str; 3] = ["secret", "signature", "token"];

/// The source with comments removed and every string or char literal
/// emptied, so that neither can hold an operator or a name.
fn strip(src: &str) -> String {
    let bytes = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < bytes.len() {
        let rest = &src[i..];
        let after_word = i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
        } else if let Some(comment) = rest.strip_prefix("/*") {
            i += comment.find("*/").map_or(rest.len(), |j| j + 4);
            out.push(' ');
        } else if !after_word && (rest.starts_with("r\"") || rest.starts_with("r#")) {
            let hashes = rest[1..].bytes().take_while(|b| *b == b'#').count();
            if rest.as_bytes().get(1 + hashes) == Some(&b'"') {
                let end = format!("\"{}", "#".repeat(hashes));
                let body = 2 + hashes;
                i += rest[body..]
                    .find(&end)
                    .map_or(rest.len(), |j| body + j + end.len());
                out.push_str("\"\"");
            } else {
                out.push('r');
                i += 1;
            }
        } else if bytes[i] == b'"' {
            let mut j = i + 1;
            while j < bytes.len() && bytes[j] != b'"' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            i = j + 1;
            out.push_str("\"\"");
        } else if let Some(len) = char_literal(rest) {
            i += len;
            out.push_str("' '");
        } else {
            let c = rest.chars().next().expect("not at the end");
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// The length of a char literal at the start of `rest` (`'a'`, `'\n'`,
/// `'\''`), or `None` for a lifetime or anything else.
fn char_literal(rest: &str) -> Option<usize> {
    let mut chars = rest.char_indices();
    if chars.next()?.1 != '\'' {
        return None;
    }
    let (_, c) = chars.next()?;
    if c == '\\' {
        let close = rest.get(3..)?.find('\'')?;
        return Some(close + 4);
    }
    let (end, close) = chars.next()?;
    (close == '\'').then_some(end + 1)
}

/// The lowercase identifiers (values, fields, functions) of `side`.
fn value_names(side: &str) -> Vec<&str> {
    side.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with(|c: char| c.is_ascii_lowercase() || c == '_'))
        .collect()
}

/// Every comparison in `src` (already stripped) with an operand named like
/// a secret: the names found and the comparison, whitespace collapsed.
fn secret_comparisons(src: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let fragments = src
        .split([';', '{', '}', ','])
        .flat_map(|f| f.split("&&"))
        .flat_map(|f| f.split("||"))
        .flat_map(|f| f.split("=>"));
    for fragment in fragments {
        if !fragment.contains("==") && !fragment.contains("!=") {
            continue;
        }
        for side in fragment.split("==").flat_map(|s| s.split("!=")) {
            let side = side.trim();
            if side.ends_with(".len()") || side.ends_with(".is_empty()") {
                continue;
            }
            for name in value_names(side) {
                let lower = name.to_ascii_lowercase();
                if SECRET_WORDS.iter().any(|w| lower.contains(w)) {
                    let shown = fragment.split_whitespace().collect::<Vec<_>>().join(" ");
                    found.push((name.to_owned(), shown));
                }
            }
        }
    }
    found
}

fn rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read source dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, files);
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
}

#[test]
fn no_secret_signature_or_token_is_compared_with_eq() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for dir in ["core/src", "host-native/src"] {
        rust_files(&repo.join(dir), &mut files);
    }
    assert!(files.len() > 50, "found the sources: {}", files.len());
    let mut offences = Vec::new();
    for file in &files {
        let src = std::fs::read_to_string(file).expect("read source");
        for (name, comparison) in secret_comparisons(&strip(&src)) {
            offences.push(format!("{}: `{name}` in `{comparison}`", file.display()));
        }
    }
    assert!(
        offences.is_empty(),
        "compare secrets with subtle's ct_eq or hmac's verify_slice, not == or !=:\n{}",
        offences.join("\n")
    );
}

/// The scan finds what it looks for, and ignores what it should.
#[test]
fn the_scan_tells_secret_comparisons_apart() {
    let found = |src: &str| -> Vec<String> {
        secret_comparisons(&strip(src))
            .into_iter()
            .map(|(name, _)| name)
            .collect()
    };
    assert_eq!(found("if given == app.secret {"), ["secret"]);
    assert_eq!(found("ok && sig_token != expected;"), ["sig_token"]);
    assert_eq!(
        found("let ok = computed\n    == request.signature;"),
        ["signature"]
    );
    assert_eq!(found("hmac_signature(a) == b,"), ["hmac_signature"]);
    assert!(found("if stage == Stage::AwaitingToken {").is_empty());
    assert!(found("if tokens.len() == 0 {").is_empty());
    assert!(found(r#"if name != "auth_signature" {"#).is_empty());
    assert!(found("// token == secret\nlet a = b;").is_empty());
    assert!(found("/* secret == x */ let a = 1;").is_empty());
    assert!(found(r##"let s = r#"token == x"#; let c = '"';"##).is_empty());
    assert_eq!(found(r"let q = '\''; if q == token {"), ["token"]);
    assert!(found("if secret.as_bytes().ct_eq(given).into() {").is_empty());
    assert!(found("fn f<'a>(token: &'a str) -> bool { status == 401 }").is_empty());
}
