//! The error of a benchmark scenario.

/// Why a scenario could not complete.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A server would not start.
    #[error(transparent)]
    Server(#[from] crate::servers::ServerError),
    /// Subscribers could not connect.
    #[error(transparent)]
    Pool(#[from] crate::pool::PoolError),
    /// The publisher failed.
    #[error(transparent)]
    Publish(#[from] crate::publisher::PublishError),
    /// Filling or paging thread histories failed.
    #[error(transparent)]
    History(#[from] crate::history::HistoryError),
    /// Setting up threads failed.
    #[error(transparent)]
    Setup(#[from] crate::proto::SetupError),
    /// Writing results failed.
    #[error("results: {0}")]
    Io(#[from] std::io::Error),
    /// The scenario saw something wrong with the server's answers.
    #[error("{0}")]
    Check(String),
}
