//! The AI SDK's `parsePartialJson`: the input of a tool call while its JSON
//! is still streaming. The text is parsed as JSON; when that fails it is
//! repaired by `fixJson` (close open strings, arrays and objects, complete
//! a literal, drop a dangling comma or key) and parsed again. Like the SDK's
//! secure parser, a value holding a `__proto__` key, or a `constructor`
//! object with a `prototype` key, counts as a failed parse.
//!
//! `fixJson` walks the text in UTF-16 code units, as JavaScript strings do,
//! so that the repaired prefix is cut exactly where the SDK cuts it.

use serde_json::Value;

/// The value of a partial JSON text, or `None` where the SDK has `undefined`.
pub(crate) fn parse_partial_json(text: &str) -> Option<Value> {
    secure_parse(text).or_else(|| secure_parse(&fix_json(text)?))
}

fn secure_parse(text: &str) -> Option<Value> {
    let value: Value = serde_json::from_str(text).ok()?;
    (!forbidden(&value)).then_some(value)
}

fn forbidden(value: &Value) -> bool {
    match value {
        Value::Object(map) => {
            map.contains_key("__proto__")
                || matches!(map.get("constructor"), Some(Value::Object(c)) if c.contains_key("prototype"))
                || map.values().any(forbidden)
        }
        Value::Array(items) => items.iter().any(forbidden),
        _ => false,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Root,
    Finish,
    InsideString,
    InsideStringEscape,
    InsideStringUnicodeEscape,
    InsideLiteral,
    InsideNumber,
    InsideObjectStart,
    InsideObjectKey,
    InsideObjectAfterKey,
    InsideObjectBeforeValue,
    InsideObjectAfterValue,
    InsideObjectAfterComma,
    InsideArrayStart,
    InsideArrayAfterValue,
    InsideArrayAfterComma,
}

/// One pass of the SDK's scanner over UTF-16 code units.
struct Scanner<'a> {
    input: &'a [u16],
    stack: Vec<State>,
    last_valid: Option<usize>,
    literal_start: usize,
    unicode_digits: u8,
}

fn unit(c: u8) -> u16 {
    u16::from(c)
}

fn is_hex(c: u16) -> bool {
    char::from_u32(u32::from(c)).is_some_and(|c| c.is_ascii_hexdigit())
}

fn literal_prefix(partial: &[u16]) -> Option<&'static str> {
    ["true", "false", "null"].into_iter().find(|word| {
        partial.len() <= word.len() && word.bytes().map(unit).zip(partial).all(|(a, b)| a == *b)
    })
}

impl Scanner<'_> {
    fn top(&self) -> Option<State> {
        self.stack.last().copied()
    }

    fn swap(&mut self, next: State, inner: State) {
        self.stack.pop();
        self.stack.push(next);
        self.stack.push(inner);
    }

    fn value_start(&mut self, c: u16, i: usize, next: State) {
        match c {
            0x22 => {
                self.last_valid = Some(i);
                self.swap(next, State::InsideString);
            }
            0x66 | 0x74 | 0x6e => {
                self.last_valid = Some(i);
                self.literal_start = i;
                self.swap(next, State::InsideLiteral);
            }
            0x2d => self.swap(next, State::InsideNumber),
            0x30..=0x39 => {
                self.last_valid = Some(i);
                self.swap(next, State::InsideNumber);
            }
            0x7b => {
                self.last_valid = Some(i);
                self.swap(next, State::InsideObjectStart);
            }
            0x5b => {
                self.last_valid = Some(i);
                self.swap(next, State::InsideArrayStart);
            }
            _ => {}
        }
    }

    fn after_object_value(&mut self, c: u16, i: usize) {
        match c {
            0x2c => {
                self.stack.pop();
                self.stack.push(State::InsideObjectAfterComma);
            }
            0x7d => {
                self.last_valid = Some(i);
                self.stack.pop();
            }
            _ => {}
        }
    }

    fn after_array_value(&mut self, c: u16, i: usize) {
        match c {
            0x2c => {
                self.stack.pop();
                self.stack.push(State::InsideArrayAfterComma);
            }
            0x5d => {
                self.last_valid = Some(i);
                self.stack.pop();
            }
            _ => {}
        }
    }

    fn step(&mut self, c: u16, i: usize) {
        let Some(state) = self.top() else { return };
        match state {
            State::Root => self.value_start(c, i, State::Finish),
            State::Finish => {}
            State::InsideObjectStart => match c {
                0x22 => self.replace(State::InsideObjectKey),
                0x7d => {
                    self.last_valid = Some(i);
                    self.stack.pop();
                }
                _ => {}
            },
            State::InsideObjectAfterComma if c == 0x22 => self.replace(State::InsideObjectKey),
            State::InsideObjectKey if c == 0x22 => self.replace(State::InsideObjectAfterKey),
            State::InsideObjectAfterKey if c == 0x3a => {
                self.replace(State::InsideObjectBeforeValue);
            }
            State::InsideObjectAfterComma
            | State::InsideObjectKey
            | State::InsideObjectAfterKey => {}
            State::InsideObjectBeforeValue => {
                self.value_start(c, i, State::InsideObjectAfterValue);
            }
            State::InsideObjectAfterValue => self.after_object_value(c, i),
            State::InsideString => match c {
                0x22 => {
                    self.stack.pop();
                    self.last_valid = Some(i);
                }
                0x5c => self.stack.push(State::InsideStringEscape),
                _ => self.last_valid = Some(i),
            },
            State::InsideArrayStart => {
                self.last_valid = Some(i);
                if c == 0x5d {
                    self.stack.pop();
                } else {
                    self.value_start(c, i, State::InsideArrayAfterValue);
                }
            }
            State::InsideArrayAfterValue => match c {
                0x2c => self.replace(State::InsideArrayAfterComma),
                0x5d => {
                    self.last_valid = Some(i);
                    self.stack.pop();
                }
                _ => self.last_valid = Some(i),
            },
            State::InsideArrayAfterComma => {
                self.value_start(c, i, State::InsideArrayAfterValue);
            }
            State::InsideStringEscape => {
                self.stack.pop();
                if c == 0x75 {
                    self.unicode_digits = 0;
                    self.stack.push(State::InsideStringUnicodeEscape);
                } else {
                    self.last_valid = Some(i);
                }
            }
            State::InsideStringUnicodeEscape => {
                if is_hex(c) {
                    self.unicode_digits += 1;
                    if self.unicode_digits == 4 {
                        self.stack.pop();
                        self.last_valid = Some(i);
                    }
                }
            }
            State::InsideNumber => self.number(c, i),
            State::InsideLiteral => {
                if literal_prefix(&self.input[self.literal_start..=i]).is_some() {
                    self.last_valid = Some(i);
                } else {
                    self.stack.pop();
                    match self.top() {
                        Some(State::InsideObjectAfterValue) => self.after_object_value(c, i),
                        Some(State::InsideArrayAfterValue) => self.after_array_value(c, i),
                        _ => {}
                    }
                }
            }
        }
    }

    fn replace(&mut self, state: State) {
        self.stack.pop();
        self.stack.push(state);
    }

    fn number(&mut self, c: u16, i: usize) {
        match c {
            0x30..=0x39 => self.last_valid = Some(i),
            0x65 | 0x45 | 0x2d | 0x2e => {}
            0x2c | 0x7d | 0x5d => {
                self.stack.pop();
                if c != 0x7d && self.top() == Some(State::InsideArrayAfterValue) {
                    self.after_array_value(c, i);
                }
                if c != 0x5d && self.top() == Some(State::InsideObjectAfterValue) {
                    self.after_object_value(c, i);
                }
            }
            _ => {
                self.stack.pop();
            }
        }
    }
}

/// The SDK's `fixJson`; `None` when the repaired prefix is not valid
/// UTF-16 (it would hold a lone surrogate, which no JSON value here can).
pub(crate) fn fix_json(input: &str) -> Option<String> {
    let units: Vec<u16> = input.encode_utf16().collect();
    let mut scanner = Scanner {
        input: &units,
        stack: vec![State::Root],
        last_valid: None,
        literal_start: 0,
        unicode_digits: 0,
    };
    for (i, &c) in units.iter().enumerate() {
        scanner.step(c, i);
    }
    let end = scanner.last_valid.map_or(0, |i| i + 1);
    let mut result = String::from_utf16(&units[..end]).ok()?;
    for state in scanner.stack.iter().rev() {
        match state {
            State::InsideString => result.push('"'),
            State::InsideObjectKey
            | State::InsideObjectAfterKey
            | State::InsideObjectAfterComma
            | State::InsideObjectStart
            | State::InsideObjectBeforeValue
            | State::InsideObjectAfterValue => result.push('}'),
            State::InsideArrayStart
            | State::InsideArrayAfterComma
            | State::InsideArrayAfterValue => {
                result.push(']');
            }
            State::InsideLiteral => {
                if let Some(word) = literal_prefix(&units[scanner.literal_start..]) {
                    result.push_str(&word[units.len() - scanner.literal_start..]);
                }
            }
            _ => {}
        }
    }
    Some(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fixed(s: &str) -> String {
        fix_json(s).unwrap()
    }

    #[test]
    fn repairs_like_the_sdk() {
        // Cases from the AI SDK's own fix-json tests.
        let cases = [
            ("", ""),
            ("nul", "null"),
            ("t", "true"),
            ("fals", "false"),
            ("12.", "12"),
            ("-", ""),
            ("2.5e", "2.5"),
            ("2.5e-", "2.5"),
            ("\"abc", "\"abc\""),
            ("\"abc\\", "\"abc\""),
            ("\"\\u00", "\"\""),
            ("\"\\u00a9", "\"\\u00a9\""),
            ("[1, ", "[1]"),
            ("[1, 2", "[1, 2]"),
            ("[[1], [2", "[[1], [2]]"),
            ("{\"key\":", "{}"),
            ("{\"key\": \"val", "{\"key\": \"val\"}"),
            ("{\"a\": 1, \"b", "{\"a\": 1}"),
            (
                "{\"a\": {\"b\": [1, {\"c\": tr",
                "{\"a\": {\"b\": [1, {\"c\": true}]}}",
            ),
            ("{\"a\": 1.5e", "{\"a\": 1.5}"),
            ("[ ", "[ ]"),
        ];
        for (input, want) in cases {
            assert_eq!(fixed(input), want, "{input:?}");
        }
    }

    #[test]
    fn parses_partial_values() {
        assert_eq!(
            parse_partial_json("{\"city\": \"Ber"),
            Some(json!({"city": "Ber"}))
        );
        assert_eq!(parse_partial_json("[1, 2"), Some(json!([1, 2])));
        assert_eq!(parse_partial_json("{\"a\":"), Some(json!({})));
        assert_eq!(parse_partial_json(""), None);
        assert_eq!(parse_partial_json("-"), None);
        // A non-ASCII character after a number is kept, as in UTF-16.
        assert_eq!(parse_partial_json("[1😀"), None);
        assert_eq!(parse_partial_json("{\"__proto__\": {}}"), None);
        assert_eq!(
            parse_partial_json("{\"constructor\": {\"prototype\": 1}}"),
            None
        );
        assert_eq!(
            parse_partial_json("{\"constructor\": 1}"),
            Some(json!({"constructor": 1}))
        );
    }
}
