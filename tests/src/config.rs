//! The default test configuration and the principals it declares.

/// Bearer token of `alice`.
pub const ALICE: &str = "token-alice";
/// Bearer token of `bob`.
pub const BOB: &str = "token-bob";
/// Bearer token of `carol`.
pub const CAROL: &str = "token-carol";
/// Bearer token of `dave`.
pub const DAVE: &str = "token-dave";
/// Bearer token of `eve`, a principal only [`config_with_eve`] declares:
/// one who holds no grant anywhere.
pub const EVE: &str = "token-eve";
/// Bearer token of `root`, an admin principal.
pub const ROOT: &str = "token-root";
/// The JWT HS256 secret of [`TEST_CONFIG`].
pub const JWT_SECRET: &str = "test-jwt-secret";
/// The channel app's id.
pub const APP_ID: &str = "app-1";
/// The channel app's public key.
pub const APP_KEY: &str = "app-key";
/// The channel app's secret.
pub const APP_SECRET: &str = "app-secret";

/// A config with five principals (alice, bob, carol, dave and the admin
/// root, tokens `token-<name>`), the JWT driver and one channel app.
pub const TEST_CONFIG: &str = r#"
admins = ["root"]

[[auth.tokens]]
token = "token-alice"
principal = "alice"

[[auth.tokens]]
token = "token-bob"
principal = "bob"

[[auth.tokens]]
token = "token-carol"
principal = "carol"

[[auth.tokens]]
token = "token-dave"
principal = "dave"

[[auth.tokens]]
token = "token-root"
principal = "root"

[auth.jwt]
secret = "test-jwt-secret"

[[apps]]
id = "app-1"
key = "app-key"
secret = "app-secret"
"#;

/// [`TEST_CONFIG`] plus the principal `eve` (token [`EVE`]).
pub fn config_with_eve() -> String {
    format!("{TEST_CONFIG}\n[[auth.tokens]]\ntoken = \"{EVE}\"\nprincipal = \"eve\"\n")
}
