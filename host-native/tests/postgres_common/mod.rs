//! What the PostgreSQL tests share: the server they use and a fresh schema
//! per test, dropped at the end.
//!
//! The server is `BUBBLE_TEST_POSTGRES` (default
//! `postgres://postgres@127.0.0.1:5432/test`). Without one the tests fail,
//! saying so: they never skip.

use sqlx::{Connection as _, Executor as _};

/// The server the tests use.
pub fn url() -> String {
    std::env::var("BUBBLE_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// Runs `sql` (one or more statements) on a new connection to `url`.
pub fn execute(url: &str, sql: String) -> Result<(), sqlx::Error> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let mut conn = sqlx::PgConnection::connect(url).await?;
        conn.execute(sqlx::AssertSqlSafe(sql)).await?;
        conn.close().await
    })
}

/// A schema no other test uses, dropped (with everything in it) when this
/// is dropped.
pub struct Schema {
    /// The server.
    pub url: String,
    /// The schema's name, `bubble_t_<random hex>`.
    pub name: String,
}

impl Schema {
    /// A new name on the test server, which must answer.
    pub fn fresh() -> Schema {
        let url = url();
        if let Err(e) = execute(&url, "SELECT 1".into()) {
            panic!(
                "these tests need PostgreSQL at {url} (set BUBBLE_TEST_POSTGRES to another \
                 server): {e}"
            );
        }
        let name = format!("bubble_t_{:016x}", getrandom::u64().expect("random"));
        Schema { url, name }
    }

    /// The `--store` value naming this schema.
    #[allow(dead_code)] // Not every test file uses it.
    pub fn spec(&self) -> String {
        let sep = if self.url.contains('?') { '&' } else { '?' };
        format!("{}{sep}schema={}", self.url, self.name)
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        if let Err(e) = execute(
            &self.url,
            format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.name),
        ) {
            eprintln!("dropping schema {}: {e}", self.name);
        }
    }
}

/// The first column of the first row of `sql` on a new connection to `url`.
#[allow(dead_code)] // Not every test file uses it.
pub fn fetch_i64(url: &str, sql: String) -> i64 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
        let value: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_one(&mut conn)
            .await
            .expect("query");
        conn.close().await.expect("close");
        value
    })
}
