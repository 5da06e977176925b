//! One server per SQLite file: an exclusive advisory lock on `<db>.lock`,
//! held for as long as the store is open (the OS drops it when the process
//! ends, however it ends).

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

/// Why the store's lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds it.
    #[error(
        "{} is in use by another bubble server (lock file {} is held); stop that server or use another store",
        db.display(),
        lock.display()
    )]
    Held {
        /// The database.
        db: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
    /// The lock file could not be opened or locked.
    #[error("locking {}: {source}", lock.display())]
    Io {
        /// The lock file.
        lock: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// The held lock; released when dropped.
#[derive(Debug)]
pub struct StoreLock {
    _file: File,
}

/// The lock file of database `db`: `<db>.lock`.
pub fn lock_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// Takes the exclusive lock of database `db` without waiting.
pub fn acquire(db: &Path) -> Result<StoreLock, LockError> {
    let lock = lock_path(db);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock)
        .map_err(|source| LockError::Io {
            lock: lock.clone(),
            source,
        })?;
    match file.try_lock() {
        Ok(()) => Ok(StoreLock { _file: file }),
        Err(TryLockError::WouldBlock) => Err(LockError::Held {
            db: db.to_owned(),
            lock,
        }),
        Err(TryLockError::Error(source)) => Err(LockError::Io { lock, source }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("b.db");
        let first = acquire(&db).unwrap();
        assert!(matches!(acquire(&db), Err(LockError::Held { .. })));
        drop(first);
        acquire(&db).unwrap();
    }
}
