//! The engine's hash maps and sets: the standard ones over `foldhash`
//! (hashbrown's default hasher), several times cheaper than SipHash for the
//! short string keys the engine hashes on every request (thread, principal
//! and socket ids). Each map's seed comes from the address-space layout and
//! a per-thread counter (`foldhash`'s `RandomState`, no system call);
//! against deliberate hash flooding this is weaker than SipHash under
//! random keys.

/// A [`std::collections::HashMap`] hashed with `foldhash`.
pub(crate) type HashMap<K, V, S = foldhash::fast::RandomState> = std::collections::HashMap<K, V, S>;

/// A [`std::collections::HashSet`] hashed with `foldhash`.
pub(crate) type HashSet<T, S = foldhash::fast::RandomState> = std::collections::HashSet<T, S>;
