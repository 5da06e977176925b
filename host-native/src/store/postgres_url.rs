//! The `postgres://…` store setting: the URL handed to the driver and the
//! schema the store's tables live in (`schema=NAME`, taken out of the URL).

use url::Url;

use super::StoreSpecError;

/// The schema used when the URL names none.
pub(super) const DEFAULT_SCHEMA: &str = "bubble";

/// The query parameter naming the schema.
const SCHEMA_PARAM: &str = "schema";

/// Splits `raw` (`postgres://…` or `postgresql://…`) into the URL for the
/// driver, without `schema=`, and the schema (default [`DEFAULT_SCHEMA`]).
pub(super) fn parse(raw: &str) -> Result<(String, String), StoreSpecError> {
    let mut url = Url::parse(raw)
        .map_err(|e| StoreSpecError::PostgresUrl(format!("{}: {e}", redact(raw))))?;
    let mut schema = None;
    let mut rest = Vec::new();
    for (key, value) in url.query_pairs() {
        if key == SCHEMA_PARAM {
            if schema.replace(value.into_owned()).is_some() {
                return Err(StoreSpecError::PostgresUrl(format!(
                    "{}: schema is given twice",
                    redact(raw)
                )));
            }
        } else {
            rest.push((key.into_owned(), value.into_owned()));
        }
    }
    let schema = schema.unwrap_or_else(|| DEFAULT_SCHEMA.to_owned());
    check_schema(&schema)?;
    if rest.is_empty() {
        url.set_query(None);
    } else {
        url.query_pairs_mut().clear().extend_pairs(rest);
    }
    Ok((url.into(), schema))
}

/// Accepts `[a-z_][a-z0-9_]{0,62}`, except the `pg_` prefix PostgreSQL
/// keeps for itself.
pub(super) fn check_schema(schema: &str) -> Result<(), StoreSpecError> {
    let mut chars = schema.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    let rest_ok = chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if first_ok && rest_ok && schema.len() <= 63 && !schema.starts_with("pg_") {
        Ok(())
    } else {
        Err(StoreSpecError::PostgresSchema(schema.to_owned()))
    }
}

/// `url` with `schema=` put back and no password (in the userinfo or a
/// `password=` parameter): what logs and messages show.
pub(super) fn display(url: &str, schema: &str) -> String {
    let Ok(mut shown) = Url::parse(url) else {
        return format!("postgres://(unparsable URL)?{SCHEMA_PARAM}={schema}");
    };
    let pairs: Vec<(String, String)> = shown
        .query_pairs()
        .filter(|(key, _)| key != "password")
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    // Only URLs with a host carry a password; the others have none to hide.
    let _ = shown.set_password(None);
    shown
        .query_pairs_mut()
        .clear()
        .extend_pairs(pairs)
        .append_pair(SCHEMA_PARAM, schema);
    shown.into()
}

/// `raw` without its password, for a message about a URL that did not
/// parse: everything between `://` and `@` after the first `:` goes.
fn redact(raw: &str) -> String {
    let Some((scheme, rest)) = raw.split_once("://") else {
        return raw.to_owned();
    };
    match rest.split_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{host}"),
            None => raw.to_owned(),
        },
        None => raw.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_parameter_is_taken_out() {
        let (url, schema) =
            parse("postgres://u:pw@h:5433/db?sslmode=disable&schema=app_1").unwrap();
        assert_eq!(url, "postgres://u:pw@h:5433/db?sslmode=disable");
        assert_eq!(schema, "app_1");
        let (url, schema) = parse("postgresql://h/db").unwrap();
        assert_eq!(
            (url.as_str(), schema.as_str()),
            ("postgresql://h/db", "bubble")
        );
        let (url, _) = parse("postgres://h/db?schema=s").unwrap();
        assert_eq!(url, "postgres://h/db");
    }

    #[test]
    fn schemas_are_checked() {
        for good in ["a", "_", "bubble_2", &"x".repeat(63)] {
            assert!(check_schema(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "A",
            "1a",
            "a-b",
            "a b",
            "é",
            "pg_x",
            &"x".repeat(64),
            "a\"b",
        ] {
            assert!(check_schema(bad).is_err(), "{bad}");
        }
        assert!(parse("postgres://h/db?schema=Bad").is_err());
        assert!(parse("postgres://h/db?schema=a&schema=b").is_err());
    }

    #[test]
    fn passwords_are_not_shown() {
        let shown = display("postgres://u:secret@h/db?password=secret&x=1", "s");
        assert_eq!(shown, "postgres://u@h/db?x=1&schema=s");
        let err = parse("postgres://u:secret@h:notaport/db")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("secret"), "{err}");
    }
}
