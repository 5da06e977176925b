//! WAL checkpoints by the writer, after a commit was reported durable.
//!
//! SQLite's automatic checkpoint runs inside the commit that grows the WAL
//! past 1000 pages: that commit also copies pages into the database file and
//! fsyncs it before it returns, and every append waiting for it waits that
//! much longer. A checkpoint on another connection, running while the writer
//! keeps committing, never catches up with the newest frames, so the WAL is
//! never reset and grows without bound under sustained load.
//!
//! So the writer turns automatic checkpoints off and checkpoints itself every
//! [`COMMITS_PER_CHECKPOINT`] commits, from [`Backend::after_commit`]: the
//! persistence worker calls it once the commit's batches were reported
//! durable, so no acknowledgement waits for it, and no commit runs during it,
//! so it copies every frame and the next commit starts the WAL over from its
//! beginning. Durability is unchanged: a commit is durable once its WAL
//! frames are synced, whenever they are later copied into the database file.
//!
//! [`Backend::after_commit`]: bubble_core::store::Backend::after_commit

use rusqlite::Connection;

use bubble_core::store::StoreError;

/// Commits between two checkpoints.
const COMMITS_PER_CHECKPOINT: u32 = 64;

/// The WAL file is truncated to this size when a checkpoint resets it after
/// a burst grew it (`journal_size_limit`).
pub(super) const WAL_SIZE_LIMIT: i64 = 64 * 1024 * 1024;

/// Counts commits and says when to checkpoint.
#[derive(Debug, Default)]
pub(super) struct Checkpoints {
    commits: u32,
}

impl Checkpoints {
    /// Records one commit; checkpoints on `conn` when one is due.
    pub(super) fn after_commit(&mut self, conn: &Connection) -> Result<(), StoreError> {
        self.commits += 1;
        if self.commits < COMMITS_PER_CHECKPOINT {
            return Ok(());
        }
        self.commits = 0;
        conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
            .map_err(|e| StoreError::Failed(format!("WAL checkpoint: {e}")))
    }
}
