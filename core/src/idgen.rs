//! Deterministic id generation from a host-supplied seed.

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Generates thread ids, socket ids and publication ids. Seeded by the host
/// (from OS randomness natively, from the page's seed field in a simulation),
/// so a run is reproducible from its seed.
#[derive(Debug, Clone)]
pub(crate) struct IdGen(ChaCha8Rng);

impl IdGen {
    /// A generator for `seed`.
    pub(crate) fn new(seed: u64) -> IdGen {
        IdGen(ChaCha8Rng::seed_from_u64(seed))
    }

    /// 32 lowercase hex characters (a pubb `socket_id`).
    pub(crate) fn hex32(&mut self) -> String {
        let mut bytes = [0u8; 16];
        self.0.fill_bytes(&mut bytes);
        crate::hex::lower(&bytes)
    }

    /// A Pusher `socket_id`: two decimal numbers joined by a dot, the form
    /// Pusher's libraries check (`^\d+\.\d+$`).
    pub(crate) fn pusher_socket_id(&mut self) -> String {
        let high = self.0.next_u32();
        let low = self.0.next_u32();
        format!("{high}.{low}")
    }

    /// A random (version 4) UUID in its hyphenated form.
    pub(crate) fn uuid_v4(&mut self) -> String {
        let mut b = [0u8; 16];
        self.0.fill_bytes(&mut b);
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        let mut uuid = String::with_capacity(36);
        for (i, group) in [&b[0..4], &b[4..6], &b[6..8], &b[8..10], &b[10..16]]
            .into_iter()
            .enumerate()
        {
            if i > 0 {
                uuid.push('-');
            }
            crate::hex::push_lower(&mut uuid, group);
        }
        uuid
    }

    /// A fresh thread version token: 1..2^63, so that versions decided by
    /// different engines over one store never coincide in practice.
    pub(crate) fn version(&mut self) -> u64 {
        (self.0.next_u64() >> 1).max(1)
    }

    /// A fresh thread id: `th_` and 20 hex characters.
    pub(crate) fn thread_id(&mut self) -> String {
        format!("th_{}", &self.hex32()[..20])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_ids() {
        let (mut a, mut b) = (IdGen::new(7), IdGen::new(7));
        assert_eq!(a.hex32(), b.hex32());
        let uuid = a.uuid_v4();
        assert_eq!(uuid, b.uuid_v4());
        assert_eq!(uuid.len(), 36);
        assert_eq!(&uuid[14..15], "4");
        let hyphens: Vec<usize> = uuid.match_indices('-').map(|(i, _)| i).collect();
        assert_eq!(hyphens, [8, 13, 18, 23]);
    }
}
